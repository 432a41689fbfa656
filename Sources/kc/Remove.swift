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
    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove an item, or a whole service with every item in it.",
            discussion: """
            With SERVICE ITEM, the item goes, at whatever accessibility it has (and from
            the vault). The service stays, even emptied, as a folder stays when its last
            file goes; 'kc rm SERVICE' removes it. Exits 1 if there is no such item.

            With SERVICE alone, the whole service goes: every item at every level, and
            what the vault keeps of it. At a terminal kc lists the items and asks first;
            elsewhere (a script, a pipe) it needs --yes.

              kc rm com.example token
              kc rm com.example            # asks: remove 'com.example' and its 3 items?
              kc rm --yes com.example      # in a script

            With --group or --from (a service another user shares with you), it is
            refused: only the owner removes items.
            """
        )

        @Argument(help: ArgumentHelp("The service, e.g. com.example.app.", valueName: "service"),
                  completion: .custom(storedServiceNames))
        var service: String

        @Argument(help: ArgumentHelp("The item to remove. Without it, the whole service is removed.", valueName: "item"),
                  completion: .custom(storedItemNames))
        var key: String?

        @Flag(name: [.customShort("y"), .long], help: "Remove a whole service without asking (for scripts).")
        var yes = false

        @OptionGroup var shared: SharedServiceOptions

        /// The names byte for byte (see ``RawArguments``).
        private var names: [KeyName] {
            get throws { try RawArguments.exactNames([service] + (key.map { [$0] } ?? [])) }
        }

        func validate() throws {
            let names = try names
            try validateArgument(names[0], as: .service)
            if names.count > 1 { try validateArgument(names[1], as: .item) }
            if yes && key != nil { throw ValidationError("--yes is for removing a whole service; 'kc rm SERVICE ITEM' never asks") }
        }

        func run() throws {
            let names = try names
            guard names.count > 1 else {
                return try removeService(names[0], confirmed: yes, group: shared.group, owner: shared.owner)
            }
            try removeItem(service: names[0], key: names[1], group: shared.group, owner: shared.owner)
        }
    }
}

/// What `kc rm SERVICE ITEM` does once its arguments are read, by the parser or by
/// ``FastPath``. The service stays, even emptied.
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
        let shownKey = ReadAudit.escaped(key.bytes, keepingSpaces: true), shown = ReadAudit.escaped(service.bytes, keepingSpaces: true)
        standardError("kc: no item '\(shownKey)' in service '\(shown)'; list the items with 'kc ls \(sharedOptionsHint(group: group, owner: owner))\(shown)'")
        throw ExitStatus.notFound
    }
    // The service stays, emptied: removing an item never removes its service, at any
    // door (docs/DESIGN-NOTES.md). 'kc rm SERVICE' removes it.
}

/// `kc rm SERVICE`: the service and every item of it, once confirmed. Only the
/// caller's own: with `--group G` the caller's service of that name (the one `kc set
/// --group` shares), never one another member shares; `--from` is refused.
func removeService(_ service: KeyName, confirmed: Bool, group: String?, owner: String?) throws {
    let shown = ReadAudit.escaped(service.bytes, keepingSpaces: true)
    if let owner {
        standardError("kc: only \(owner), who owns '\(shown)', can remove the whole service; ask them to run 'kc rm \(shown)'")
        throw ExitStatus.failure
    }
    let keychain = try openKeychain(service, group: nil, owner: nil)
    let items = try keychain.allKeyNamesIncludingVault()
    if items.isEmpty, try !keychain.serviceExists() {
        if group != nil, let shared = try? Keychain.sharedServices(group: group).first(where: { $0.service == service }) {
            standardError("kc: only \(shared.ownerName), who owns '\(shown)', can remove the whole service; ask them to run 'kc rm \(shown)'")
            throw ExitStatus.failure
        }
        standardError("kc: no service '\(shown)'; list the services with 'kc ls'")
        throw ExitStatus.notFound
    }
    if !confirmed {
        let count = items.count == 1 ? "its 1 item" : "its \(items.count) items"
        guard standardInputIsTerminal else {
            let options = sharedOptionsHint(group: group, owner: nil)
            standardError("kc: 'kc rm \(options)\(shown)' removes the whole service and \(count); add --yes to do that from a script, or name the item: kc rm \(options)\(shown) ITEM")
            throw ExitStatus.usage
        }
        let listed = items.prefix(10).map { ReadAudit.escaped($0.bytes, keepingSpaces: true) }.joined(separator: ", ")
        let more = items.count > 10 ? ", …" : ""
        let question = items.isEmpty ? "Remove the empty service '\(shown)'? [y/N] " : "Remove '\(shown)' and \(count) (\(listed)\(more))? [y/N] "
        guard askYesOrNo(question) else {
            standardError("kc: nothing was removed")
            throw ExitStatus.failure
        }
    }
    try keychain.removeAll()
}

/// Asks on standard error and reads a line of standard input (a terminal), all of it,
/// so that nothing typed is left for the shell: true for y or yes, in any case, with
/// spaces around it.
private func askYesOrNo(_ question: String) -> Bool {
    var text = question
    text.withUTF8 { bytes in _ = writeAll(fd: 2, UnsafeRawBufferPointer(bytes)) }
    var answer: [UInt8] = []
    var byte: UInt8 = 0
    while read(0, &byte, 1) == 1, byte != UInt8(ascii: "\n") {
        if answer.count < 16 { answer.append(byte) }
    }
    let word = String(decoding: answer, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
    return word.count == 1 && ["y", "yes"].contains(word[0].lowercased())
}
