import ArgumentParser
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

extension KC {
    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a value to standard output, exactly as stored.",
            discussion: """
            Nothing is added: no trailing newline. Exits 1 if there is no such item.

              kc get com.example token
              kc get --group deploy com.example token    # shared with you through 'deploy'
              kc get --from alice com.example token      # the one alice shares with you

            With KC_AUDIT=1 in the environment, each value written is logged (journal,
            else syslog authpriv): the program that ran kc get, its uid and executable,
            and the service and item; never the value.
            """
        )

        @OptionGroup var item: ItemArguments
        @OptionGroup var shared: SharedServiceOptions

        func validate() throws {
            try item.validate()
        }

        func run() throws {
            try printValue(keychain: shared.keychain(item.serviceName), key: item.keyName, options: shared.commandLine)
        }
    }
}

/// `kc get`: the bytes go straight from the kernel's buffer to standard output.
/// `options` repeats --group/--from in the hint of the not-found message.
func printValue(keychain: Keychain, key: KeyName, options: String = "") throws {
    let written = try reporting { () throws(KeychainError) in
        try keychain.withBytes(forKey: key) { writeAll(fd: 1, $0) }
    }
    switch written {
    case nil:
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
