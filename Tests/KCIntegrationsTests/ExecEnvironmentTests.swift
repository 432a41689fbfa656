@testable import KCIntegrations
import Keyrings
import XCTest

/// What `kc exec --env` makes of items, in-process: variable names, the names it
/// refuses, and the environment its command gets, byte for byte.
final class ExecEnvironmentTests: XCTestCase {
    private func item(_ service: String, _ name: String, _ value: [UInt8] = Array("v".utf8)) -> PassedItem {
        PassedItem(service: KeyName(service), name: KeyName(name), value: value)
    }

    private func refusal(_ items: [PassedItem], allowing allowed: [String] = [], shared: Bool = false) -> String? {
        do {
            _ = try EnvironmentNames.variables(for: items, allowing: allowed, sharedByAnotherUser: shared)
            return nil
        } catch {
            return error.message
        }
    }

    // MARK: Names

    func testItemNamesBecomeShellNames() {
        XCTAssertEqual(EnvironmentNames.variable(for: "token"), "TOKEN")
        XCTAssertEqual(EnvironmentNames.variable(for: "db.password"), "DB_PASSWORD")
        XCTAssertEqual(EnvironmentNames.variable(for: "db-password"), "DB_PASSWORD")
        XCTAssertEqual(EnvironmentNames.variable(for: "9lives"), "_9LIVES", "a name cannot start with a digit")
        XCTAssertEqual(EnvironmentNames.variable(for: "Mixed_Case2"), "MIXED_CASE2")
        XCTAssertEqual(EnvironmentNames.variable(for: "café"), "CAF_", "only ASCII letters stay")
        XCTAssertEqual(EnvironmentNames.variable(for: KeyName(bytes: [0x61, 0xff, 0x62])), "A_B", "bytes that are not UTF-8 too")
    }

    func testEachItemGetsItsVariableInOrder() throws {
        let items = [item("s", "token"), item("s", "db.password"), item("t", "9lives")]
        let variables = try EnvironmentNames.variables(for: items, allowing: [], sharedByAnotherUser: false)
        XCTAssertEqual(variables.map(\.name), ["TOKEN", "DB_PASSWORD", "_9LIVES"])
        XCTAssertEqual(variables.map(\.index), [0, 1, 2])
    }

    /// ExecTests.testEnvNameCollisionsAndNULBytesAreErrors, in-process.
    func testTwoItemsOfOneVariableAndNULBytesAreRefused() {
        XCTAssertEqual(refusal([item("s", "db.password"), item("s", "db-password")]),
                       "items 's/db.password' and 's/db-password' both become $DB_PASSWORD; rename one, or use --files")
        XCTAssertEqual(refusal([item("s", "blob", [0x61, 0x00, 0x62])]),
                       "item 'blob' of 's' contains a NUL byte and cannot be an environment variable; use --files")
        XCTAssertEqual(refusal([item("s", "blob", [0]), item("s", "ld.preload")]),
                       "item 'ld.preload' of 's' would become $LD_PRELOAD, which changes what programs load, run or trust; rename the item, use --files, or pass --allow-env LD_PRELOAD if you mean it",
                       "names are checked before values")
    }

    // MARK: Dangerous names

    /// ExecAttackTests.testEnvRefusesItemsThatWouldBecomeLoaderShellOrLookupVariables, in-process.
    func testItemsThatWouldBecomeLoaderShellOrLookupVariablesAreRefused() {
        for (name, variable) in [("ld.preload", "LD_PRELOAD"), ("bash_env", "BASH_ENV"), ("path", "PATH"),
                                 ("home", "HOME"), ("pythonpath", "PYTHONPATH"), ("node_options", "NODE_OPTIONS"),
                                 ("glibc.tunables", "GLIBC_TUNABLES"), ("git_ssh_command", "GIT_SSH_COMMAND")] {
            XCTAssertEqual(refusal([item("com.example", name)]), """
                item '\(name)' of 'com.example' would become $\(variable), which changes what programs load, run or trust; \
                rename the item, use --files, or pass --allow-env \(variable) if you mean it
                """)
        }
    }

    /// ExecAttackTests.testAGroupMemberCannotPreloadALibraryIntoYourCommand: a service
    /// another user shares is told to its reader differently, and --allow-env is not offered.
    func testASharedServicesRefusalAsksItsOwner() {
        XCTAssertEqual(refusal([item("shared", "ld.preload")], shared: true),
                       "item 'ld.preload' of 'shared' would become $LD_PRELOAD, which changes what programs load, run or trust; ask its owner to rename the item, or use --files")
    }

    /// ExecAttackTests.testAllowEnvPassesTheNamedVariableFromYourOwnServiceAndNoOther.
    func testAllowEnvPassesOnlyTheNamedVariable() throws {
        let variables = try EnvironmentNames.variables(for: [item("s", "path")], allowing: ["PATH"], sharedByAnotherUser: false)
        XCTAssertEqual(variables.map(\.name), ["PATH"])
        XCTAssertEqual(refusal([item("s", "path"), item("s", "home")], allowing: ["PATH"]),
                       "item 'home' of 's' would become $HOME, which changes what programs load, run or trust; rename the item, use --files, or pass --allow-env HOME if you mean it")
    }

    func testThePatternsCoverPrefixesAndExactNames() {
        for name in ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "MALLOC_CHECK_", "BASH_FUNC_X__", "PYTHONSTARTUP", "PERL5OPT",
                     "GIT_CONFIG_GLOBAL", "SSL_CERT_FILE", "KRB5_CONFIG", "IFS", "TMPDIR", "SHELL", "EDITOR", "CLASSPATH"] {
            XCTAssertTrue(DangerousVariables.contains(name), name)
        }
        for name in ["TOKEN", "DB_PASSWORD", "LDAP_URL", "PATHS", "HOME_DIR", "MY_PATH", "GIT_TOKEN", "SSL_KEY", "_9LIVES", "LD"] {
            XCTAssertFalse(DangerousVariables.contains(name), name)
        }
    }

    // MARK: The child's environment

    func testSettingAVariableReplacesEveryInheritedEntryOfThatName() {
        var environment = ChildEnvironment(entries: [Array("TOKEN=old".utf8), Array("HOME=/root".utf8), Array("TOKEN=older".utf8),
                                                     Array("TOKEN".utf8), Array("TOKENS=kept".utf8)])
        environment.set("TOKEN", to: [0x6e, 0xff, 0x77])
        XCTAssertEqual(environment.entries, [Array("HOME=/root".utf8), Array("TOKENS=kept".utf8), Array("TOKEN=n".utf8) + [0xff, 0x77]],
                       "an entry without '=' is all name; the value's bytes are kept as they are")
        environment.overwriteWithZeros()
        XCTAssertTrue(environment.entries.allSatisfy { $0.allSatisfy { $0 == 0 } })
    }

    func testTheInheritedEnvironmentIsReadByteForByte() {
        let name = "KC_INTEGRATIONS_TEST_\(getpid())"
        let value: [CChar] = [0x61, CChar(bitPattern: 0xff), 0x3d, 0x62, 0]
        XCTAssertEqual(setenv(name, value, 1), 0)
        defer { unsetenv(name) }
        let entry = ChildEnvironment.inherited().entries.first { $0.starts(with: Array("\(name)=".utf8)) }
        XCTAssertEqual(entry, Array("\(name)=".utf8) + [0x61, 0xff, 0x3d, 0x62])
    }
}
