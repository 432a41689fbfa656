import KeyringCore

/// The plain command line of ``FastPath``: the core's ``PlainCommandLine`` (the reader
/// the front uses too) over this process's argv.
extension PlainCommandLine {
    /// argv from index `first` on, read as `spelling`.
    init?(from first: Int, _ spelling: Spelling) {
        self.init(argc: CommandLine.argc, argv: CommandLine.unsafeArgv, from: first, spelling)
    }

    /// The option's value, if it was given.
    func value(_ option: [StaticString]) -> String? {
        valueWord(option).map { String(cString: $0) }
    }

    /// Whether argv[index] is `word`.
    static func argument(_ index: Int, is word: StaticString) -> Bool {
        argument(argc: CommandLine.argc, argv: CommandLine.unsafeArgv, index, is: word)
    }
}
