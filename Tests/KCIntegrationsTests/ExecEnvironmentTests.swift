@testable import KCIntegrations
import Keyrings
import XCTest

/// What `kc exec --env` makes of items, in-process: variable names, the names it
/// refuses, and the environment its command gets, byte for byte.
final class ExecEnvironmentTests: XCTestCase {
    private func item(_ service: String, _ name: String, _ value: [UInt8] = Array("v".utf8)) -> PassedItem {
        PassedItem(service: KeyName(service), name: KeyName(name), value: value)
    }

    private func refusal(_ items: [PassedItem], every: Bool = true, named: [String] = [], allowing allowed: [String] = [],
                         shared: Bool = false) -> String? {
        do {
            _ = try EnvironmentNames.variables(for: items, of: Array(Set(items.map(\.service))).sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) },
                                               every: every, named: named.map(variable), allowing: allowed, sharedByAnotherUser: shared)
            return nil
        } catch {
            return error.message
        }
    }

    private func variable(_ text: String) -> EnvironmentNames.NamedVariable {
        EnvironmentNames.NamedVariable(KeyName(text))!
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
        let variables = try EnvironmentNames.variables(for: items, every: true, allowing: [], sharedByAnotherUser: false)
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
                                 ("glibc.tunables", "GLIBC_TUNABLES"), ("git_ssh_command", "GIT_SSH_COMMAND"),
                                 ("openssl_conf", "OPENSSL_CONF"), ("lessopen", "LESSOPEN"), ("ssh_auth_sock", "SSH_AUTH_SOCK"),
                                 ("credentials_directory", "CREDENTIALS_DIRECTORY"), ("ps1", "PS1")] {
            XCTAssertEqual(refusal([item("com.example", name)]), """
                item '\(name)' of 'com.example' would become $\(variable), which changes what programs load, run or trust; \
                rename the item, use --files, or pass --allow-env \(variable) if you mean it
                """)
        }
    }

    /// ExecAttackTests.testAServiceAnotherUserSharesSetsOnlyTheVariablesTheMemberNames:
    /// no deny list is complete, so the sharer never picks a variable name.
    func testAServiceAnotherUserSharesSetsOnlyTheVariablesTheCallerNames() throws {
        let items = [item("shared", "token"), item("shared", "openssl_conf"), item("shared", "lessopen")]
        XCTAssertEqual(refusal(items, shared: true), EnvironmentNames.Refusal.sharedNeedsNamesMessage)
        XCTAssertEqual(refusal(items, every: true, named: ["TOKEN"], shared: true), EnvironmentNames.Refusal.sharedNeedsNamesMessage,
                       "--env is refused even beside --var")
        let named = try EnvironmentNames.variables(for: items, every: false, named: [variable("TOKEN"), variable("API_KEY=token")],
                                                   allowing: [], sharedByAnotherUser: true)
        XCTAssertEqual(named.map(\.name), ["TOKEN", "API_KEY"])
        XCTAssertEqual(named.map(\.index), [0, 0])
    }

    /// ExecAttackTests.testAGroupMemberCannotPreloadALibraryIntoYourCommand: a dangerous
    /// name the caller chose is refused too, without --allow-env's way out for a shared service.
    func testADangerousNameIsRefusedWhenTheCallerNamesItToo() {
        let items = [item("s", "ld.preload"), item("s", "token")]
        XCTAssertEqual(refusal(items, every: false, named: ["LD_PRELOAD"], shared: true),
                       "$LD_PRELOAD changes what programs load, run or trust, and a value another user shares or may write may not set it; choose another name for --var, or use --files")
        XCTAssertEqual(refusal(items, every: false, named: ["LD_PRELOAD=token"], allowing: ["LD_PRELOAD"], shared: true),
                       "$LD_PRELOAD changes what programs load, run or trust, and a value another user shares or may write may not set it; choose another name for --var, or use --files",
                       "--allow-env never opens a shared service")
        XCTAssertEqual(refusal(items, every: false, named: ["http_proxy=token"]),
                       "$http_proxy changes what programs load, run or trust; choose another name for --var, or pass --allow-env http_proxy if you mean it",
                       "names are compared in upper case: curl reads http_proxy")
        XCTAssertNil(refusal(items, every: false, named: ["LD_PRELOAD"], allowing: ["LD_PRELOAD"]), "your own, allowed by name")
    }

    func testVarNamesOneItemOrRefusesWithTheWayOut() {
        let items = [item("a", "token"), item("a", "db.password"), item("b", "token"), item("a", "db-password")]
        XCTAssertEqual(refusal(items, every: false, named: ["T=missing"]),
                       "no item 'missing' in 'a' or 'b' for $T; list the items with 'kc ls a'")
        XCTAssertEqual(refusal(items, every: false, named: ["NOPE"]),
                       "no item of 'a' or 'b' becomes $NOPE; name it with --var NOPE=ITEM (list the items with 'kc ls a')")
        XCTAssertEqual(refusal(items, every: false, named: ["T=token"]),
                       "$T could come from 'a' or 'b'; run one kc exec per service, or rename an item")
        XCTAssertEqual(refusal(items, every: false, named: ["DB_PASSWORD"]),
                       "items 'a/db.password' and 'a/db-password' both become $DB_PASSWORD; rename one, or use --files")
        XCTAssertEqual(refusal(items, every: false, named: ["X=db.password", "X=db-password"]),
                       "$X is named twice with --var, for 'a/db.password' and 'a/db-password'; give each its own name",
                       "the caller named $X twice: no item needs renaming")
        XCTAssertEqual(refusal([item("a", "Path")], every: false, named: ["Path"]),
                       "$Path changes what programs load, run or trust; choose another name for --var, or pass --allow-env Path if you mean it",
                       "a name kc will not set is refused first, not sent looking for an item")
        XCTAssertNil(refusal(items, every: false, named: ["X=db.password", "X=db.password", "Y=db-password"]),
                     "naming one item twice is no clash")
    }

    /// Found attacking round three's fixes: in one's own group-writable share the values
    /// are the members' (TAR_OPTIONS with --checkpoint-action=exec ran bob's command as
    /// alice), so it is treated as a service another user shares.
    func testAServiceMembersMayWriteSetsOnlyTheVariablesTheCallerNames() throws {
        let items = [item("build", "token"), item("build", "tar_options")]
        func refusal(every: Bool, named: [String], allowing: [String] = []) -> String? {
            do {
                _ = try EnvironmentNames.variables(for: items, of: ["build"], every: every, named: named.map(variable),
                                                   allowing: allowing, sharedByAnotherUser: false, writableByMembers: ("build", "deploy"))
                return nil
            } catch { return error.message }
        }
        XCTAssertEqual(refusal(every: true, named: []),
                       "members of group 'deploy' may write the values of 'build', so --env would let them choose what your command runs with: replace --env with --var NAME (or --var NAME=ITEM) for each, or use --files")
        XCTAssertEqual(refusal(every: false, named: ["TAR_OPTIONS"], allowing: ["TAR_OPTIONS"]),
                       "$TAR_OPTIONS changes what programs load, run or trust, and a value another user shares or may write may not set it; choose another name for --var, or use --files",
                       "--allow-env does not open it either")
        XCTAssertNil(refusal(every: false, named: ["TOKEN"]))
        XCTAssertTrue(DangerousVariables.contains("TAR_OPTIONS") && DangerousVariables.contains("MAKEFLAGS") && DangerousVariables.contains("RSYNC_RSH"))
    }

    func testVarArgumentsAreNamesOrNameEqualsItem() {
        XCTAssertEqual(EnvironmentNames.NamedVariable(KeyName("TOKEN")), .init(name: "TOKEN"))
        XCTAssertEqual(EnvironmentNames.NamedVariable(KeyName("gh_token=a=b")), .init(name: "gh_token", item: "a=b"), "the first '=' ends the name")
        XCTAssertEqual(EnvironmentNames.NamedVariable(KeyName(bytes: [0x58, 0x3d, 0xff])), .init(name: "X", item: KeyName(bytes: [0xff])))
        for bad in ["", "=token", "9X", "A-B", "X=", "É=x", "A B"] {
            XCTAssertNil(EnvironmentNames.NamedVariable(KeyName(bad)), bad)
        }
    }

    /// ExecAttackTests.testAllowEnvPassesTheNamedVariableFromYourOwnServiceAndNoOther.
    func testAllowEnvPassesOnlyTheNamedVariable() throws {
        let variables = try EnvironmentNames.variables(for: [item("s", "path")], every: true, allowing: ["PATH"], sharedByAnotherUser: false)
        XCTAssertEqual(variables.map(\.name), ["PATH"])
        XCTAssertEqual(refusal([item("s", "path"), item("s", "home")], allowing: ["PATH"]),
                       "item 'home' of 's' would become $HOME, which changes what programs load, run or trust; rename the item, use --files, or pass --allow-env HOME if you mean it")
    }

    func testThePatternsCoverPrefixesAndExactNames() {
        for name in ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "MALLOC_CHECK_", "BASH_FUNC_X__", "PYTHONSTARTUP", "PERL5OPT",
                     "GIT_CONFIG_GLOBAL", "SSL_CERT_FILE", "KRB5_CONFIG", "IFS", "TMPDIR", "SHELL", "EDITOR", "CLASSPATH",
                     "OPENSSL_CONF", "OPENSSL_MODULES", "LESSOPEN", "LESSCLOSE", "MANPAGER", "VIMINIT", "SSH_AUTH_SOCK",
                     "CREDENTIALS_DIRECTORY", "XDG_DATA_DIRS", "GTK_MODULES", "DOTNET_STARTUP_HOOKS", "LUA_INIT",
                     "AWS_CONFIG_FILE", "KUBECONFIG", "SSLKEYLOGFILE", "HTTPS_PROXY", "PIP_INDEX_URL", "KC_AUDIT", "PS1"] {
            XCTAssertTrue(DangerousVariables.contains(name), name)
        }
        for name in ["TOKEN", "DB_PASSWORD", "LDAP_URL", "PATHS", "HOME_DIR", "MY_PATH", "GIT_TOKEN", "SSL_KEY", "_9LIVES", "LD",
                     "GH_TOKEN", "GOOGLE_API_KEY", "CARGO_REGISTRY_TOKEN", "NPM_TOKEN", "AWS_SECRET_ACCESS_KEY", "PSQL_PASSWORD"] {
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
