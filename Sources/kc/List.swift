import ArgumentParser
import KernelKeychain

extension KC {
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls",
            abstract: "List services, or the items of one service.",
            discussion: """
            Plain output is one name per line. --long adds, per item: access level,
            size in bytes, time left before the kernel expires it ('-' for none; as
            coarse as /proc/keys: 59m means 59 to 60 minutes) and the key's serial.

            --json (stable): without SERVICE, {"services": ["name", ...]}; with SERVICE,
            {"service": "name", "items": [{"name", "access", "thisDeviceOnly",
            "size", "secondsLeft" (null for none), "serial"}]}.
            """
        )

        @Argument(help: "List the items of this service instead of the services.")
        var service: String?

        @Flag(name: .shortAndLong, help: "Show access level, size, time left and serial of each item.")
        var long = false

        @Flag(help: "Print JSON (see the schema above).")
        var json = false

        func validate() throws {
            if let service { try validateArgument(service, as: .service) }
        }

        func run() throws {
            guard let service else {
                let services = try reporting { () throws(KeychainError) in try Keychain.services() }
                if json { return try printJSON(ServiceList(services: services)) }
                for name in services { print(name) }
                return
            }
            let items = try reporting { () throws(KeychainError) in try Keychain(service: service).items() }
            let services = try reporting { () throws(KeychainError) in try Keychain.services() }
            if items.isEmpty && !services.contains(service) {
                standardError("kc: no service '\(service)'; list the services with 'kc ls'")
                throw ExitStatus.notFound
            }
            if json {
                return try printJSON(ItemList(service: service, items: items.map(ItemEntry.init)))
            }
            for item in items {
                guard long else { print(item.name); continue }
                let left = item.secondsLeft.map(formatSeconds) ?? "-"
                print("\(item.name)\t\(item.accessibility.name)\t\(item.size)\t\(left)\t\(item.serial)")
            }
        }
    }
}

struct ServiceList: Encodable {
    var services: [String]
}

struct ItemList: Encodable {
    var service: String
    var items: [ItemEntry]
}

struct ItemEntry: Encodable {
    var name: String
    var access: String
    var thisDeviceOnly: Bool
    var size: Int
    var secondsLeft: UInt64?
    var serial: Int32

    init(_ item: KeychainItem) {
        name = item.name
        access = item.accessibility.level.rawValue
        thisDeviceOnly = item.accessibility.isThisDeviceOnly
        size = item.size
        secondsLeft = item.secondsLeft
        serial = item.serial.rawValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(access, forKey: .access)
        try container.encode(thisDeviceOnly, forKey: .thisDeviceOnly)
        try container.encode(size, forKey: .size)
        try container.encode(secondsLeft, forKey: .secondsLeft)  // null, not absent
        try container.encode(serial, forKey: .serial)
    }

    enum CodingKeys: String, CodingKey {
        case name, access, thisDeviceOnly, size, secondsLeft, serial
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
