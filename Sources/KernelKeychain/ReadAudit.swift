public import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One read of an item, for the audit log: who read which item, never what it holds.
/// `kc mount --audit` records one per open of an item file; `kc get` one per value
/// written when `KC_AUDIT=1`.
public struct ItemRead: Sendable {
    /// How the value was reached: `mount` or `kc-get`.
    public var via: String
    public var service: KeyName
    public var item: KeyName
    /// The reading process (thread group) and its real uid.
    public var readerPID: Int32
    public var readerUID: UInt32
    /// What the reader may do with the value: `read`, or for a file opened through the
    /// mount `write` or `read-write`. The line begins with it.
    public var access: String
    /// `kc-get`: the pid of kc itself (the reader is the program that ran it).
    public var kcPID: Int32?

    public init(via: String, service: KeyName, item: KeyName, readerPID: Int32, readerUID: UInt32,
                access: String = "read", kcPID: Int32? = nil) {
        self.via = via
        self.service = service
        self.item = item
        self.readerPID = readerPID
        self.readerUID = readerUID
        self.access = access
        self.kcPID = kcPID
    }
}

/// The audit log's sink: the journal through its native protocol when
/// /run/systemd/journal/socket exists, else syslog (facility authpriv, ident `kc`,
/// written to /dev/log as syslog(3) writes it, never waiting on a full socket). A line that cannot be delivered is dropped:
/// auditing never makes a read fail.
///
/// The line is `ACCESS service=S item=I pid=P uid=U exe=E via=V [kc_pid=K]`, where ACCESS
/// is `read` (or, for a file opened through the mount to be written, `write` or
/// `read-write`) and VIA is `mount` or `kc-get`.
/// Names and the executable path are escaped (``escaped(_:)``) so each field is one
/// space-free token of printable UTF-8.
public enum ReadAudit {
    public static let journalSocket = "/run/systemd/journal/socket"

    /// Whether `KC_AUDIT` asks `kc get` to audit: set, and neither empty nor `0`.
    /// One getenv, so the unaudited `kc get` pays nothing more.
    public static var requestedByEnvironment: Bool {
        guard let value = getenv("KC_AUDIT") else { return false }
        return !(value.pointee == 0 || (value.pointee == UInt8(ascii: "0") && value[1] == 0))
    }

    /// Logs `read` to the journal, or to syslog where there is no journal.
    public static func record(_ read: ItemRead) {
        let executable = executablePath(of: read.readerPID)
        let line = message(read, executable: executable)
        var journalFields: [(String, String)] = [
            ("MESSAGE", line),
            ("PRIORITY", "6"),
            ("SYSLOG_FACILITY", "10"),
            ("SYSLOG_IDENTIFIER", "kc"),
            ("KC_SERVICE", escaped(read.service.bytes)),
            ("KC_ITEM", escaped(read.item.bytes)),
            ("KC_READER_PID", String(read.readerPID)),
            ("KC_READER_UID", String(read.readerUID)),
            ("KC_READER_EXE", executable.map { escaped($0) } ?? "?"),
            ("KC_VIA", read.via),
        ]
        journalFields.append(("KC_ACCESS", read.access))
        if let kcPID = read.kcPID { journalFields.append(("KC_GET_PID", String(kcPID))) }
        if sendToJournal(journalFields) { return }
        sendToSyslog(line)
    }

    /// The one-line text of an audit record.
    public static func message(_ read: ItemRead, executable: [UInt8]?) -> String {
        var line = "\(read.access) service=\(escaped(read.service.bytes)) item=\(escaped(read.item.bytes))"
        line += " pid=\(read.readerPID) uid=\(read.readerUID) exe=\(executable.map { escaped($0) } ?? "?") via=\(read.via)"
        if let kcPID = read.kcPID { line += " kc_pid=\(kcPID)" }
        return line
    }

    /// `bytes` as printable UTF-8 without spaces: control bytes, space, DEL, backslash,
    /// every byte that is not part of valid UTF-8, and the bytes of every character
    /// that is not visible ink (C1 controls such as NEL, format characters such as
    /// bidirectional overrides and zero-width spaces, line and paragraph separators,
    /// other spaces) become `\xHH`: a name cannot start a new line or fake another
    /// field (`item=x\u{2003}uid=0`) in what a person or a program reads. `kc ls`
    /// shows names this way too (``mayEscape(_:)``).
    ///
    /// `keepingSpaces`: an ASCII space stays a space, for listings whose fields are
    /// separated by tabs or lines (`kc ls`), where a name like `My Token` should read so.
    public static func escaped(_ bytes: [UInt8], keepingSpaces: Bool = false) -> String {
        var text = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte >= 0x80, let (length, scalar) = validUTF8Sequence(bytes, at: index), isVisible(scalar) {
                text += String(decoding: bytes[index..<index + length], as: UTF8.self)
                index += length
                continue
            }
            if keepingSpaces && byte == 0x20 {
                text.unicodeScalars.append(" ")
            } else if byte <= 0x20 || byte == 0x7f || byte == UInt8(ascii: "\\") || byte >= 0x80 {
                let hex = String(byte, radix: 16)
                text += "\\x" + (byte < 16 ? "0" : "") + hex
            } else {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            }
            index += 1
        }
        return text
    }

    /// Whether ``escaped(_:keepingSpaces:)`` keeping spaces may change `name`: false
    /// means its escaped form is its bytes, unchanged. A cheap test on the bytes, for listings that escape only where
    /// a name needs it.
    public static func mayEscape(_ name: KeyName) -> Bool {
        guard let text = name.text else { return true }  // not UTF-8: it does
        return text.utf8.contains { $0 < 0x20 || $0 == 0x7f || $0 == UInt8(ascii: "\\") || $0 >= 0x80 }
    }

    private static func isVisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .spaceSeparator, .privateUse, .surrogate, .unassigned:
            false
        default:
            true
        }
    }

    /// The length and scalar of the valid multi-byte UTF-8 sequence at `index`, or nil.
    private static func validUTF8Sequence(_ bytes: [UInt8], at index: Int) -> (Int, Unicode.Scalar)? {
        let lead = bytes[index]
        let length: Int
        switch lead {
        case 0xc2...0xdf: length = 2
        case 0xe0...0xef: length = 3
        case 0xf0...0xf4: length = 4
        default: return nil
        }
        guard index + length <= bytes.count else { return nil }
        var decoder = UTF8()
        var iterator = bytes[index..<index + length].makeIterator()
        guard case .scalarValue(let scalar) = decoder.decode(&iterator) else { return nil }
        return (length, scalar)
    }

    /// readlink /proc/PID/exe: the reader's program (needs ptrace access to it, as `ls -l
    /// /proc/PID/exe` does). Nil if it is gone or not ours to see.
    public static func executablePath(of pid: Int32) -> [UInt8]? {
        guard pid > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count)
        guard count > 0 else { return nil }
        return buffer[..<count].map { UInt8(bitPattern: $0) }
    }

    /// One datagram of `FIELD=value` lines to journald (the native protocol); false if
    /// there is no journal here or it refused. Values never hold a newline (they are
    /// escaped), so the plain form serves.
    private static func sendToJournal(_ fields: [(String, String)]) -> Bool {
        var stats = stat()
        guard lstat(journalSocket, &stats) == 0, stats.st_mode & S_IFMT == S_IFSOCK else { return false }
        var datagram: [UInt8] = []
        for (name, value) in fields {
            datagram += Array(name.utf8) + [UInt8(ascii: "=")] + Array(value.utf8) + [UInt8(ascii: "\n")]
        }
        return sendDatagram(datagram, to: journalSocket, waiting: false)
    }

    /// One syslog line to /dev/log, in the form syslog(3) writes (`<86>Nov 25 23:03:01
    /// kc[PID]: line`: facility authpriv, severity info), sent without waiting: libc's
    /// syslog blocks while the reader's socket buffer is full, and a stalled syslog
    /// must not stop kc-secretd or the mount.
    private static func sendToSyslog(_ line: String) {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        var stamp = [CChar](repeating: 0, count: 32)
        let length = strftime(&stamp, stamp.count, "%b %e %H:%M:%S", &parts)
        let time = String(decoding: stamp[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        _ = sendDatagram(Array("<86>\(time) kc[\(getpid())]: \(line)".utf8), to: "/dev/log", waiting: false)
    }
}
