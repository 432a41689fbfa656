import ArgumentParser
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension KC {
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls",
            abstract: "List services, or the items of one service.",
            discussion: """
            Plain output is one name per line. --long adds, per item: access level,
            size in bytes, time left before the kernel expires it ('-' for none; as
            coarse as /proc/keys: 59m means 59 to 60 minutes) and the key's serial.

            --shared lists the services other users share with you, as OWNER/SERVICE
            (the path under the shared/ folder of 'kc mount --shared'); --long adds the
            group and whether it may write. With --group or --from, SERVICE is one
            another user shares with you; its items' level is theirs to know ('-').

            With the vault unlocked, the items it keeps for this session that the kernel
            lacks (saved by another session, an expired persistent keyring) are loaded
            first, as 'kc get' does on a miss: when-unlocked ones only in a login session
            that unlocked (cron and services get none); with it locked, kc lists what the
            kernel has.

            Names are bytes. Plain output prints them exactly into a pipe or a file; at a
            terminal, and always in --long, a name is shown as the read audit shows it: a
            control byte, space, backslash or byte that is not UTF-8 becomes backslash-x
            and two hex digits (a tab: backslash-x09), so no name can split a line or a
            column. --json (stable): without SERVICE,
            {"services": ["name", ...]}; with SERVICE, {"service": "name", "items":
            [{"name", "access" (null for another user's item), "thisDeviceOnly" (null
            likewise), "size", "secondsLeft" (null for none), "serial", "owner",
            "sharedWith" (group name, null if private), "groupWritable"}]}; with
            --shared, {"shared": [{"owner", "uid", "service", "group", "gid",
            "groupWritable"}]}. A name that is not UTF-8 shows U+FFFD for its other
            bytes and comes with its exact bytes in base64: "nameBase64" or
            "serviceBase64" beside it, and for the services list "servicesBase64", an
            array matching "services" with null for each name that is UTF-8.
            """
        )

        @Argument(help: "List the items of this service instead of the services.", completion: .custom(storedServiceNames))
        var service: String?

        @Flag(help: "List the services other users share with you.")
        var shared = false

        @OptionGroup var sharedService: SharedServiceOptions

        @Flag(name: .shortAndLong, help: "Show access level, size, time left and serial of each item.")
        var long = false

        @Flag(help: "Print JSON (see the schema above).")
        var json = false

        func validate() throws {
            // The exact bytes, as run() uses them (a byte that is not UTF-8 is one byte).
            if let service { try validateArgument(RawArguments.exactNames([service])[0], as: .service) }
        }

        func run() throws {
            if shared {
                guard service == nil else {
                    throw ValidationError("--shared lists services; to list the items of one, use kc ls --from OWNER SERVICE")
                }
                return try listShared()
            }
            guard let service else {
                guard json else { return try listServiceNames() }
                return try printJSON(ServiceList(Keychain.services()))
            }
            let serviceName = try RawArguments.exactNames([service])[0]
            if !long && !json {
                return try listItemNames(service: serviceName, group: sharedService.group, owner: sharedService.owner)
            }
            let keychain = try sharedService.keychain(serviceName)
            let items = try keychain.items()
            if items.isEmpty { try requireService(keychain, named: serviceName) }
            if json {
                return try printJSON(ItemList(service: serviceName, items: items.map(ItemEntry.init)))
            }
            // --long (--json returned above): a table for people, whose names are
            // escaped so that none can split a column or a line.
            var output = OutputLines()
            for item in items {
                let left = item.secondsLeft.map(formatSeconds) ?? "-"
                output.add(ReadAudit.escaped(item.name.bytes, keepingSpaces: true), "\t\(item.accessibility?.name ?? "-")\t\(item.size)\t\(left)\t\(item.serial)")
            }
            try output.write()
        }

        private func listShared() throws {
            let found = try Keychain.sharedServices(group: sharedService.group, owner: sharedService.owner)
            if json { return try printJSON(SharedList(shared: found.map(SharedEntry.init))) }
            var output = OutputLines()
            let owners = found.map { KeyName($0.ownerName) }, groups = found.map { KeyName($0.sharing.group.name) }
            // --long always escapes (a table); the plain list, as plain `kc ls` does.
            let escape = long || showsEscapedNames(owners + found.map(\.service))
            for (index, entry) in found.enumerated() {
                let owner = escape ? ReadAudit.escaped(owners[index].bytes, keepingSpaces: true).keyName : owners[index]
                let service = escape ? ReadAudit.escaped(entry.service.bytes, keepingSpaces: true).keyName : entry.service
                guard long else { output.add(owner, "/", service); continue }
                output.add(owner, "/", service,
                           "\t\(ReadAudit.escaped(groups[index].bytes))\t\(entry.sharing.isGroupWritable ? "writable" : "read-only")")
            }
            try output.write()
        }
    }
}

/// Plain `kc ls`: one service name per line (by the parser or by ``FastPath``).
func listServiceNames() throws {
    try writeNames(Keychain.services())
}

/// One name per line: exact for a script, escaped at a terminal (``showsEscapedNames(_:)``).
func writeNames(_ names: [KeyName]) throws {
    let escape = showsEscapedNames(names)
    var output = OutputLines()
    for name in names { output.add(escape ? ReadAudit.escaped(name.bytes, keepingSpaces: true).keyName : name) }
    try output.write()
}

/// Whether a plain listing shows its names escaped as the read audit does
/// (``ReadAudit/escaped(_:)``): when standard output is a terminal, as `ls` does, so a
/// name cannot fake a line or send escape sequences to the terminal; never through a
/// pipe or into a file, where scripts read names exactly (`--json` is exact too). The
/// terminal is asked only when a name would change.
private func showsEscapedNames(_ names: [KeyName]) -> Bool {
    names.contains(where: ReadAudit.mayEscape) && isatty(1) == 1
}

/// Plain `kc ls SERVICE`: one item name per line, without the /proc/keys read that
/// only --long's time left needs.
func listItemNames(service: KeyName, group: String?, owner: String?) throws {
    let keychain = try openKeychain(service, group: group, owner: owner)
    let names = try keychain.itemNames()
    if names.isEmpty { try requireService(keychain, named: service) }
    try writeNames(names)
}

/// A service with no items lists nothing; one that does not exist is an error (exit 1).
/// Another user's shared service exists if it was reached at all.
private func requireService(_ keychain: Keychain, named service: KeyName) throws {
    let exists = try keychain.accessGroup != nil || keychain.owner != nil || keychain.serviceExists()
    guard exists else {
        standardError("kc: no service '\(service)'; list the services with 'kc ls'")
        throw ExitStatus.notFound
    }
}

struct SharedList: Encodable {
    var shared: [SharedEntry]
}

struct SharedEntry: Encodable {
    var owner: String
    var uid: UInt32
    var service: KeyName
    var group: String
    var gid: UInt32
    var groupWritable: Bool

    init(_ shared: SharedService) {
        owner = shared.ownerName
        uid = shared.owner
        service = shared.service
        group = shared.sharing.group.name
        gid = shared.sharing.group.gid
        groupWritable = shared.sharing.isGroupWritable
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(owner, forKey: .owner)
        try container.encode(uid, forKey: .uid)
        try container.encode(service, forKey: .service, base64Key: .serviceBase64)
        try container.encode(group, forKey: .group)
        try container.encode(gid, forKey: .gid)
        try container.encode(groupWritable, forKey: .groupWritable)
    }

    enum CodingKeys: String, CodingKey {
        case owner, uid, service, serviceBase64, group, gid, groupWritable
    }
}

struct ServiceList: Encodable {
    var services: [String]
    /// Present when a name is not UTF-8: the exact bytes of each, null for the others.
    var servicesBase64: [String?]?

    init(_ names: [KeyName]) {
        services = names.map(\.jsonText)
        let exact = names.map(\.jsonBase64)
        servicesBase64 = exact.contains { $0 != nil } ? exact : nil
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(services, forKey: .services)
        try container.encodeIfPresent(servicesBase64, forKey: .servicesBase64)
    }

    enum CodingKeys: String, CodingKey {
        case services, servicesBase64
    }
}

struct ItemList: Encodable {
    var service: KeyName
    var items: [ItemEntry]

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(service, forKey: .service, base64Key: .serviceBase64)
        try container.encode(items, forKey: .items)
    }

    enum CodingKeys: String, CodingKey {
        case service, serviceBase64, items
    }
}

struct ItemEntry: Encodable {
    var name: KeyName
    var access: String?
    var thisDeviceOnly: Bool?
    var size: Int
    var secondsLeft: UInt64?
    var serial: Int32
    var owner: String
    var sharedWith: String?
    var groupWritable: Bool

    init(_ item: KeychainItem) {
        name = item.name
        access = item.accessibility?.level.rawValue
        thisDeviceOnly = item.accessibility?.isThisDeviceOnly
        size = item.size
        secondsLeft = item.secondsLeft
        serial = item.serial.rawValue
        owner = item.ownerName
        sharedWith = item.sharing?.group.name
        groupWritable = item.sharing?.isGroupWritable ?? false
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name, base64Key: .nameBase64)
        try container.encode(access, forKey: .access)  // null, not absent
        try container.encode(thisDeviceOnly, forKey: .thisDeviceOnly)
        try container.encode(size, forKey: .size)
        try container.encode(secondsLeft, forKey: .secondsLeft)  // null, not absent
        try container.encode(serial, forKey: .serial)
        try container.encode(owner, forKey: .owner)
        try container.encode(sharedWith, forKey: .sharedWith)
        try container.encode(groupWritable, forKey: .groupWritable)
    }

    enum CodingKeys: String, CodingKey {
        case name, nameBase64, access, thisDeviceOnly, size, secondsLeft, serial, owner, sharedWith, groupWritable
    }
}

func formatSeconds(_ seconds: UInt64) -> String {
    switch seconds {
    case ..<60: "\(seconds)s"
    case ..<3600: "\(seconds / 60)m"
    case ..<86400: "\(seconds / 3600)h"
    default: "\(seconds / 86400)d"
    }
}
