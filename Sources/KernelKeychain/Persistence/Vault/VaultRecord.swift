import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What one vault file holds once decrypted: the item whole, so that its file name and
/// folder are only an index. The service and name are inside too (so a file renamed
/// on disk, or swapped with another, is caught), with the level, the device-only flag,
/// the absolute deadline, when it was written (the newer of two copies wins when a
/// crash left both) and whose it is: the boot load with the host key, which can open
/// every user's `always` files, loads a file only into the keyring of the uid inside it,
/// so a copy of another user's file planted in your vault loads nothing.
///
///     kc-vault-item 1
///     service 636f6d2e676974687562          (hex: names are any bytes)
///     name 746f6b656e
///     access after-first-unlock
///     deadline 1764000000                    (or "none")
///     written 1763900000123456789            (nanoseconds since the epoch)
///     owner 1000                             (the uid whose vault wrote it; optional)
///
///     <the value's bytes, exactly>
internal struct VaultRecord {
    var service: KeyName
    var name: KeyName
    var accessibility: Accessibility
    var deadline: Deadline?
    var written: Int64
    /// Nil in a record written by hand (`age -r`): such a file loads at the owner's
    /// unlock, never at boot.
    var owner: UInt32?
    var value: [UInt8]

    static let magic = "kc-vault-item 1"

    init(service: KeyName, name: KeyName, accessibility: Accessibility, deadline: Deadline?, value: [UInt8],
         written: Int64 = VaultRecord.nowNanoseconds, owner: UInt32? = geteuid()) {
        self.owner = owner
        self.service = service
        self.name = name
        self.accessibility = accessibility
        self.deadline = deadline
        self.written = written
        self.value = value
    }

    static var nowNanoseconds: Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Whether the deadline has passed: such an item is not loaded, and its file goes.
    var isExpired: Bool { deadline.map { $0.secondsSinceEpoch <= Deadline.now } ?? false }

    func encoded() -> [UInt8] {
        var header = Self.magic + "\n"
        header += "service " + Self.hex(service.bytes) + "\n"
        header += "name " + Self.hex(name.bytes) + "\n"
        header += "access " + accessibility.name + "\n"
        header += "deadline " + (deadline.map { String($0.secondsSinceEpoch) } ?? "none") + "\n"
        header += "written " + String(written) + "\n"
        if let owner { header += "owner " + String(owner) + "\n" }
        header += "\n"
        return Array(header.utf8) + value
    }

    /// Parses a decrypted file; nil if it is not a record of this format.
    init?(decoding bytes: [UInt8]) {
        guard let blank = Self.endOfHeader(bytes) else { return nil }
        let lines = bytes[..<blank].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        guard lines.count == 6 || lines.count == 7, String(decoding: lines[0], as: UTF8.self) == Self.magic else { return nil }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            let text = String(decoding: line, as: UTF8.self)
            guard let space = text.firstIndex(of: " ") else { return nil }
            fields[String(text[..<space])] = String(text[text.index(after: space)...])
        }
        guard let service = fields["service"].flatMap(Self.unhex), let name = fields["name"].flatMap(Self.unhex),
              let accessibility = fields["access"].flatMap(Accessibility.init(name:)),
              let deadlineText = fields["deadline"], let written = fields["written"].flatMap({ Int64($0) })
        else { return nil }
        if let text = fields["owner"] {
            guard let owner = UInt32(text) else { return nil }
            self.owner = owner
        } else {
            owner = nil
        }
        if deadlineText == "none" {
            deadline = nil
        } else if let seconds = Int64(deadlineText) {
            deadline = Deadline(secondsSinceEpoch: seconds)
        } else {
            return nil
        }
        self.service = KeyName(bytes: service)
        self.name = KeyName(bytes: name)
        self.accessibility = accessibility
        self.written = written
        self.value = Array(bytes[(blank + 2)...])
    }

    /// The index of the "\n\n" that ends the header.
    private static func endOfHeader(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for index in 0..<(bytes.count - 1) where bytes[index] == 10 && bytes[index + 1] == 10 { return index }
        return nil
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static func unhex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, !digits.isEmpty else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

extension Accessibility {
    /// The accessibility whose ``name`` this is (`after-first-unlock+this-device-only`).
    public init?(name: String) {
        guard let found = Accessibility.allCases.first(where: { $0.name == name }) else { return nil }
        self = found
    }
}
