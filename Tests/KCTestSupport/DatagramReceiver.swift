import Foundation
import XCTest
import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

/// A bound AF_UNIX datagram socket a test listens on, standing in for systemd's
/// `$NOTIFY_SOCKET`, journald's socket or syslog's /dev/log. `address` is a path, or an
/// abstract name written `@name`; a path is removed when the receiver is closed.
///
/// A thread reads every datagram as it comes, into memory: a Unix datagram socket
/// queues only `net.unix.max_dgram_qlen` (10) unread datagrams, and then blocks every
/// sender. A syslog() call in pam_unix or runuser would wait for good on a test that
/// reads later, and the test on it.
public final class DatagramReceiver: @unchecked Sendable {
    public let address: String
    private var descriptor: Int32
    private let condition = NSCondition()
    private var received: [[UInt8]] = []
    private var stopped = false
    private var reader: Thread?

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
        let fd = descriptor
        let thread = Thread { [weak self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while let self {
                self.condition.lock()
                let done = self.stopped
                self.condition.unlock()
                if done { return }
                var watched = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&watched, 1, 50) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                guard count >= 0 else { continue }
                self.condition.lock()
                self.received.append(Array(buffer[..<count]))
                self.condition.broadcast()
                self.condition.unlock()
            }
        }
        reader = thread
        thread.start()
    }

    /// A fresh abstract address, or a fresh path under /tmp.
    public static func uniqueAddress(abstract: Bool, label: String = "notify") -> String {
        let name = "kc-test-\(label)-\(getpid())-\(UUID().uuidString.prefix(8))"
        return abstract ? "@" + name : "/tmp/" + name + ".sock"
    }

    /// The next datagram, or nil if none arrives within `seconds`.
    public func receive(within seconds: Double) -> [UInt8]? {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while received.isEmpty {
            guard condition.wait(until: deadline) || !received.isEmpty else { return nil }
        }
        return received.removeFirst()
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
        condition.lock()
        let wasStopped = stopped
        stopped = true
        condition.unlock()
        guard !wasStopped, descriptor >= 0 else { return }
        // The reader sees `stopped` within one poll; then the descriptor can go.
        while let reader, !reader.isFinished { usleep(10_000) }
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
