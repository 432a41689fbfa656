import ArgumentParser
import KernelKeychain
import Keyrings

extension KC {
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove an item, at whatever accessibility it has.",
            discussion: "Exits 1 if there is no such item. With --group or --from (a service another user shares with you), it is refused: only the owner removes items."
        )

        @OptionGroup var item: ItemArguments
        @OptionGroup var shared: SharedServiceOptions

        func validate() throws {
            try item.validate()
        }

        func run() throws {
            try removeItem(service: item.serviceName, key: item.keyName, group: shared.group, owner: shared.owner)
        }
    }
}

/// What `kc rm` does once its arguments are read, by the parser or by ``FastPath``.
func removeItem(service: KeyName, key: KeyName, group: String?, owner: String?) throws {
    let keychain = try openKeychain(service, group: group, owner: owner)
    let removed = try keychain.remove(key)
    if !removed {
        // `--group G` removes from the caller's own service of that name; one a member
        // of G shares is its owner's to remove from, and the hint below would list it.
        if group != nil, owner == nil, let shared = try? Keychain.sharedServices(group: group).first(where: { $0.service == service }),
           (try? Keychain(service: service).serviceExists()) != true {
            standardError("kc: only \(shared.ownerName), who owns '\(service)', can remove items; ask them to do it")
            throw ExitStatus.failure
        }
        standardError("kc: no item '\(key)' in service '\(service)'; list the items with 'kc ls \(sharedOptionsHint(group: group, owner: owner))\(service)'")
        throw ExitStatus.notFound
    }
}
