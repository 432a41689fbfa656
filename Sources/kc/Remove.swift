import ArgumentParser
import KernelKeychain

extension KC {
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove an item, at whatever accessibility it has.",
            discussion: "Exits 1 if there is no such item."
        )

        @OptionGroup var item: ItemArguments

        func validate() throws {
            try item.validate()
        }

        func run() throws {
            let removed = try reporting { () throws(KeychainError) in
                try Keychain(service: item.service).remove(item.key)
            }
            if !removed {
                standardError("kc: no item '\(item.key)' in service '\(item.service)'; list the items with 'kc ls \(item.service)'")
                throw ExitStatus.notFound
            }
        }
    }
}
