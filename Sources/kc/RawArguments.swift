import ArgumentParser
import Keyrings

/// Names as the kernel passed them in argv.
///
/// ArgumentParser sees each argument as a `String`, which repairs bytes that are not
/// UTF-8 to U+FFFD; but a name is bytes (`$'a\xffb'` and `$'a\xfeb'` are two items).
/// A parsed name without U+FFFD is exactly its UTF-8. One with U+FFFD is taken from
/// the argv entry that repairs to it (or the value of an `--option=value` entry). When
/// several different entries repair to the same text, the names asked for together
/// take them in argv order, provided there are as many entries as names; otherwise
/// which is which cannot be told, and the command refuses rather than guess.
enum RawArguments {
    /// `ignoringLast`: how many entries at the end of argv are not kc's own (the
    /// command `kc exec` runs), and so never the name asked for.
    static func exactNames(_ parsed: [String], ignoringLast: Int = 0) throws -> [KeyName] {
        var names = parsed.map { KeyName($0) }
        let needingBytes = Set(parsed.filter { $0.unicodeScalars.contains("\u{FFFD}") })
        guard !needingBytes.isEmpty else { return names }
        let entries = argvEntries().dropLast(ignoringLast)
        for text in needingBytes {
            let candidates = entries.filter { String(decoding: $0.bytes, as: UTF8.self) == text }
            let positions = parsed.indices.filter { parsed[$0] == text }
            if Set(candidates).count == 1 {
                for position in positions { names[position] = candidates[0] }
            } else if candidates.count == positions.count {
                for (position, candidate) in zip(positions, candidates) { names[position] = candidate }
            } else {
                throw ValidationError("'\(text)' is not valid UTF-8 and several arguments look like it; pass the names in separate commands")
            }
        }
        return names
    }

    /// Every argument after the program name, and for `-x=value` or `--name=value` also
    /// the value.
    private static func argvEntries() -> [KeyName] {
        var entries: [KeyName] = []
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { continue }
            let entry = KeyName(cString: pointer)
            if entry.bytes.first == UInt8(ascii: "-"), let equals = entry.bytes.firstIndex(of: UInt8(ascii: "=")) {
                entries.append(KeyName(bytes: entry.bytes[(equals + 1)...]))
            } else {
                entries.append(entry)
            }
        }
        return entries
    }
}
