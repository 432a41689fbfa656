import Foundation
import XCTest
import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

/// A bound AF_UNIX datagram socket a test listens on, standing in for systemd's
/// `$NOTIFY_SOCKET`, journald's socket or syslog's /dev/log. `address` is a path, or an
/// abstract name written `@name`; a path is removed when the receiver is closed.
public final class DatagramReceiver {
    public let address: String
    private var descriptor: Int32

    public init(address: String) throws {
        self.address = address
        guard var socketAddress = UnixSocketAddress(address) else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(ENAMETOOLONG), userInfo: [NSLocalizedDescriptionKey: "address \(address)"])
        }
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let status = socketAddress.withSockaddr { bind(descriptor, $0, $1) }
        guard descriptor >= 0, status == 0 else {
            let code = errno
            Glibc.close(descriptor)
            descriptor = -1
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(code), userInfo: [NSLocalizedDescriptionKey: "bind \(address)"])
        }
        if !address.hasPrefix("@") { chmod(address, 0o666) }
    }

    /// A fresh abstract address, or a fresh path under /tmp.
    public static func uniqueAddress(abstract: Bool, label: String = "notify") -> String {
        let name = "kc-test-\(label)-\(getpid())-\(UUID().uuidString.prefix(8))"
        return abstract ? "@" + name : "/tmp/" + name + ".sock"
    }

    /// The next datagram, or nil if none arrives within `seconds`.
    public func receive(within seconds: Double) -> [UInt8]? {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let left = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, left)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 { return nil }
            return Array(buffer[..<count])
        }
    }

    /// Datagrams until one satisfies `matches` (returned) or `seconds` pass (nil).
    public func receive(within seconds: Double, where matches: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        while let datagram = receive(within: max(0, deadline.timeIntervalSinceNow)) {
            let text = String(decoding: datagram, as: UTF8.self)
            if matches(text) { return text }
        }
        return nil
    }

    public func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
        if !address.hasPrefix("@") { unlink(address) }
    }

    deinit { close() }
}

extension DatagramReceiver {
    /// Listens on /dev/log as syslog does, for a test that checks what kc logs there:
    /// XCTSkip (never a failure) where that needs root, a journal listens instead, or
    /// /dev/log exists already (another listener's). Close it when done.
    public static func listenAsSyslog() throws -> DatagramReceiver {
        guard getuid() == 0 else { throw XCTSkip("binding /dev/log needs root") }
        guard !FileManager.default.fileExists(atPath: ReadAudit.journalSocket) else {
            throw XCTSkip("a journal listens here (\(ReadAudit.journalSocket)); kc logs there, not to /dev/log")
        }
        var info = stat()
        guard lstat("/dev/log", &info) != 0 else { throw XCTSkip("/dev/log already exists and is not this test's") }
        return try DatagramReceiver(address: "/dev/log")
    }
}
