import CKeyutils

/// A command line in the plain spelling scripts write, read from argv directly: the
/// spelling both programs serve without ArgumentParser (the full kc's fast path,
/// Sources/kc/FastPath.swift, and the front, Front/Front.swift), read by this one reader.
///
/// The plain spelling: flags and options as separate words (`--name VALUE`, never
/// `--name=VALUE` or `-qx`), each at most once unless it repeats by nature, an option's
/// value not empty and not starting with `-`; then the names; an optional `--` after
/// which a name may start with `-` (or, for a command that runs one, the command
/// begins). Anything else gives nil and is left to the parser, which accepts every
/// spelling this does and means the same by it.
public struct PlainCommandLine {
    /// What a command accepts in its plain spelling.
    public struct Spelling {
        /// Flags, each with its aliases (`["-q", "--quiet"]`).
        public var flags: [[StaticString]]
        /// Options taking one value, each with its aliases.
        public var options: [[StaticString]]
        /// Options that may be given more than once (`kc exec --service`).
        public var repeatable: [StaticString]
        /// How many names.
        public var names: ClosedRange<Int>
        /// Everything after `--` is a command to run (`kc exec`), and `--` is required.
        public var command: Bool

        public init(flags: [[StaticString]] = [], options: [[StaticString]] = [], repeatable: [StaticString] = [],
                    names: ClosedRange<Int>, command: Bool = false) {
            self.flags = flags
            self.options = options
            self.repeatable = repeatable
            self.names = names
            self.command = command
        }
    }

    private var seen: [(spelled: UnsafePointer<CChar>, value: UnsafePointer<CChar>?)] = []
    public private(set) var names: [UnsafePointer<CChar>] = []
    public private(set) var command: [UnsafePointer<CChar>] = []

    /// argv from index `first` on, read as `spelling`.
    public init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, from first: Int, _ spelling: Spelling) {
        let argc = Int(argc)
        var index = first, optionsEnded = false
        while index < argc {
            guard let word = Self.word(argv, index) else { return nil }
            index += 1
            if optionsEnded || word.pointee != CChar(UInt8(ascii: "-")) {
                guard !spelling.command else { return nil }  // a command comes only after --
                names.append(word)
                continue
            }
            if strcmp(word, "--") == 0 {
                if spelling.command {
                    while index < argc {
                        guard let word = argv[index] else { return nil }
                        command.append(UnsafePointer(word))
                        index += 1
                    }
                    guard !command.isEmpty else { return nil }
                    break
                }
                optionsEnded = true
            } else if let flag = spelling.flags.first(where: { Self.matches(word, $0) }) {
                guard !seen.contains(where: { Self.matches($0.spelled, flag) }) else { return nil }
                seen.append((word, nil))
            } else if let option = spelling.options.first(where: { Self.matches(word, $0) }) {
                let repeats = spelling.repeatable.contains { strcmp(word, cString($0)) == 0 }
                guard repeats || !seen.contains(where: { Self.matches($0.spelled, option) }),
                      index < argc, let value = Self.word(argv, index),
                      value.pointee != 0, value.pointee != CChar(UInt8(ascii: "-")) else { return nil }
                index += 1
                seen.append((word, value))
            } else {
                return nil
            }
        }
        guard spelling.names.contains(names.count), !spelling.command || !command.isEmpty else { return nil }
    }

    /// Whether the flag (under any of its aliases) was given.
    public func has(_ flag: [StaticString]) -> Bool {
        seen.contains { Self.matches($0.spelled, flag) }
    }

    /// The option's value, if it was given.
    public func valueWord(_ option: [StaticString]) -> UnsafePointer<CChar>? {
        for entry in seen where Self.matches(entry.spelled, option) { return entry.value }
        return nil
    }

    /// Every value of a repeatable option, in order.
    public func values(_ option: [StaticString]) -> [UnsafePointer<CChar>] {
        var values: [UnsafePointer<CChar>] = []
        for entry in seen where Self.matches(entry.spelled, option) {
            if let value = entry.value { values.append(value) }
        }
        return values
    }

    /// Whether every name is one kc takes as it is (``NameRules/isValid(_:)-(UnsafePointer<CChar>)``).
    public var namesAreValid: Bool {
        names.allSatisfy { NameRules.isValid($0) }
    }

    /// Whether argv[index] is `word`.
    public static func argument(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                                _ index: Int, is word: StaticString) -> Bool {
        guard index < Int(argc), let argument = argv[index] else { return false }
        return strcmp(argument, cString(word)) == 0
    }

    private static func word(_ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, _ index: Int) -> UnsafePointer<CChar>? {
        argv[index].map { UnsafePointer($0) }
    }

    private static func matches(_ word: UnsafePointer<CChar>, _ aliases: [StaticString]) -> Bool {
        aliases.contains { strcmp(word, cString($0)) == 0 }
    }
}
