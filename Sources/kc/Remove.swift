import ArgumentParser
import KernelKeychain

extension KC {
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove an item, at whatever accessibility it has.",
            discussion: "Exits 1 if there is no such item. With --group or --from, removes from a service another user shares with you, if they made it group-writable."
        )

        @OptionGroup var item: ItemArguments
        @OptionGroup var shared: SharedServiceOptions

        func validate() throws {
            try item.validate()
        }

        func run() throws {
            let (service, key) = (try item.serviceName, try item.keyName)
            let keychain = try shared.keychain(service)
            let removed = try reporting { () throws(KeychainError) in try keychain.remove(key) }
            if !removed {
                standardError("kc: no item '\(key)' in service '\(service)'; list the items with 'kc ls \(shared.commandLine)\(service)'")
                throw ExitStatus.notFound
            }
        }
    }
}
