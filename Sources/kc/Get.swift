import ArgumentParser
import KCIntegrations
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension KC {
    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a value to standard output, exactly as stored.",
            discussion: """
            A pipe or a file gets the value's bytes and nothing else. On a terminal, a
            value that does not end in a newline gets one, so the prompt starts on a
            line of its own. Exits 1 if there is no such item; with -q, silently, for
            password commands (BORG_PASSCOMMAND='kc get -q com.example borg'). A vault
            that holds the item but is locked says so even with -q.

              kc get com.example token
              kc get -q com.example token || echo "not set"
              kc get --group deploy com.example token    # shared with you through 'deploy'
              kc get --from alice com.example token      # the one alice shares with you

            With KC_AUDIT=1 in the environment, each value written is logged (journal,
            else syslog authpriv): the program that ran kc get, its uid and executable,
            and the service and item; never the value.
            """
        )

        @OptionGroup var item: ItemArguments
        @OptionGroup var shared: SharedServiceOptions

        @Flag(name: .shortAndLong, help: "If there is no such item, print nothing (still exit 1). Other failures are still reported.")
        var quiet = false

        func validate() throws {
            try item.validate()
        }

        func run() throws {
            try printValue(keychain: shared.keychain(item.serviceName), key: item.keyName, options: shared.commandLine, quiet: quiet)
        }
    }
}

/// `kc get`: the bytes go straight from the kernel's buffer to standard output, and
/// a newline after them only for a terminal (see `Get`'s help).
/// `options` repeats --group/--from in the hint of the not-found message; `quiet`
/// drops that message (a vault that holds the item locked still says so).
func printValue(keychain: Keychain, key: KeyName, options: String = "", quiet: Bool = false) throws {
    let written = try keychain.withBytes(forKey: key) { value in
        guard writeAll(fd: 1, value) else { return false }
        // isatty is one ioctl, asked only when a newline might be added.
        if value.last != UInt8(ascii: "\n") && isatty(1) == 1 {
            return withUnsafeBytes(of: UInt8(ascii: "\n")) { writeAll(fd: 1, $0) }
        }
        return true
    }
    switch written {
    case nil:
        if quiet { throw ExitStatus.notFound }
        let service = keychain.service ?? ""
        standardError("kc: no item '\(key)' in service '\(service)'; list the items with 'kc ls \(options)\(service)'")
        throw ExitStatus.notFound
    case false?:
        standardError("kc: cannot write to standard output")
        throw ExitStatus.failure
    case true?:
        // The reader is the program that ran kc get (its parent), which receives the
        // value; kc's own pid goes in kc_pid.
        if ReadAudit.requestedByEnvironment {
            ReadAudit.record(ItemRead(via: "kc-get", service: keychain.serviceName ?? "", item: key,
                                      readerPID: getppid(), readerUID: getuid(), kcPID: getpid()))
        }
        return
    }
}
