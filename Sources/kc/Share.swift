import ArgumentParser
import KernelKeychain

extension KC {
    struct Share: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Share one of your services with a Unix group, or show how it is shared.",
            discussion: """
            Members of GROUP can then read every item of SERVICE, now and later:
            'kc get --group GROUP SERVICE KEY', 'kc ls --shared', or the shared/ folder of
            'kc mount --shared'. Nobody else can. With --group-writable they may also
            change item values, no larger than an item is and only for items without a
            deadline (only you add, remove or time items; the kernel lets a member with
            write revoke an item, destroying its value: the vault brings yours back).
            You must be in GROUP yourself.

            Members reach your keys by serial, so the service must outlive their use of it:
            items stored at when-unlocked live in your login session's keyring and vanish
            for everyone when that session ends. Share services stored at
            after-first-unlock or always.

              kc share com.example --group deploy
              kc share com.example            # prints: com.example: shared with group deploy (read-only)
            """
        )

        @Argument(help: "One of your services.", completion: .custom(storedServiceNames))
        var service: String

        @Option(help: ArgumentHelp("The Unix group to share with.", valueName: "group"))
        var group: String?

        @Flag(help: "Let the group change item values too (values no larger than the item; items without a deadline).")
        var groupWritable = false

        func validate() throws {
            try validateArgument(RawArguments.exactNames([service])[0], as: .service)
            if groupWritable && group == nil { throw ValidationError("--group-writable needs --group GROUP") }
        }

        func run() throws {
            let serviceName = try RawArguments.exactNames([service])[0]
            let keychain = try Keychain(service: serviceName)
            if let group {
                try keychain.share(with: group, writable: groupWritable)
                return
            }
            let sharing = try keychain.sharing()
            guard let sharing else { return print("\(serviceName): private") }
            print("\(serviceName): shared with group \(sharing.group.name) (\(sharing.isGroupWritable ? "writable" : "read-only"))")
        }
    }

    struct Unshare: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop sharing a service: the group loses access at once.",
            discussion: "Members who already copied a value keep their copy; rotate the secret if that matters."
        )

        @Argument(help: "One of your services.", completion: .custom(storedServiceNames))
        var service: String

        func validate() throws {
            try validateArgument(RawArguments.exactNames([service])[0], as: .service)
        }

        func run() throws {
            let serviceName = try RawArguments.exactNames([service])[0]
            let keychain = try Keychain(service: serviceName)
            try keychain.unshare()
        }
    }
}
