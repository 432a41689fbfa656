#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// kc-secretd's messages: one line each on standard error (the journal or the
/// terminal that started it), prefixed `kc-secretd:`.
enum Log {
    nonisolated(unsafe) static var verbose = false

    static func error(_ message: String) { write("kc-secretd: " + message + "\n") }

    static func info(_ message: String) {
        if verbose { write("kc-secretd: " + message + "\n") }
    }

    private static func write(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let count = Glibc.write(2, raw.baseAddress! + offset, raw.count - offset)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return }
                offset += count
            }
        }
    }
}
