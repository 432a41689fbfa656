import ArgumentParser

/// The nearest of some names to a misspelt one, for "did you mean" in a usage error:
/// at most two edits away (an insertion, deletion, substitution or swap of neighbours
/// each), and only if no other name is as near.
enum Suggestion {
    static func nearest(_ word: String, among candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word, $0)) }.filter { $0.1 <= 2 }
        guard let best = scored.min(by: { $0.1 < $1.1 }), scored.filter({ $0.1 == best.1 }).count == 1 else { return nil }
        return best.0
    }

    /// Optimal string alignment distance over the names' characters.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }

    /// The long options a command's help lists (`--access`, `--timeout`, ...).
    static func longOptions(of command: any ParsableCommand.Type) -> [String] {
        var names: Swift.Set<String> = []
        for word in command.helpMessage(columns: 200).split(whereSeparator: { " ,\n[]<>=|()".contains($0) }) where word.hasPrefix("--") && word.count > 2 {
            names.insert(String(word))
        }
        return names.sorted()
    }

    /// The first `--option` in `arguments` (before a `--`) that `command` does not have.
    static func unknownOption(in arguments: [String], of command: any ParsableCommand.Type) -> String? {
        let known = longOptions(of: command)
        for argument in arguments {
            if argument == "--" { break }
            guard argument.hasPrefix("--") else { continue }
            let name = String(argument.prefix { $0 != "=" })
            if !known.contains(name) { return name }
        }
        return nil
    }
}
