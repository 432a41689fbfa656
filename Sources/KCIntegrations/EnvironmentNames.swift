import KernelKeychain
import KeyringCore
import Keyrings

/// The variables `kc exec` makes of items: with `--env` every item, `db.password`
/// becoming `DB_PASSWORD`; with `--var NAME[=ITEM]` only the variables the caller names.
/// An item that would make a variable in ``DangerousVariables``, clash with another
/// item's, or hold a NUL byte is refused.
///
/// Items of a service another user shares, or of one's own that group members may write,
/// reach the command only through names the caller chose (`--var`): no deny list can
/// name every variable that makes some program load or run something, so whoever else
/// chooses the values does not get to pick the variables too.
public enum EnvironmentNames {
    /// Why the items cannot all become variables: `message` is the line after `kc: `,
    /// naming the item and the way out; it never holds a value.
    public enum Refusal: Error {
        /// Two items become the same variable.
        case collision(variable: String, first: (service: KeyName, item: KeyName), second: (service: KeyName, item: KeyName))
        /// The item would set a variable that changes what programs load, run or trust.
        /// `namedByCaller`: a `--var` chose the name, not the item's own name.
        case dangerous(variable: String, service: KeyName, item: KeyName, sharedByAnotherUser: Bool, namedByCaller: Bool = false)
        /// An environment string cannot hold a NUL byte.
        case nulByte(service: KeyName, item: KeyName)
        /// Every item of a service another user shares was asked for (`--env`).
        case sharedNeedsNames
        /// Every item of one's own service that members of a group-writable share may
        /// write was asked for (`--env`).
        case membersWriteValues(service: KeyName, group: String)
        /// The caller named one variable twice, for two items.
        case namedTwice(variable: String, first: (service: KeyName, item: KeyName), second: (service: KeyName, item: KeyName))
        /// No item, or more than one, answers a `--var`.
        case noItem(NamedVariable, services: [KeyName])
        case ambiguous(NamedVariable, services: [KeyName])

        public var message: String {
            switch self {
            case .collision(let variable, let first, let second):
                "items '\(first.service)/\(first.item)' and '\(second.service)/\(second.item)' both become $\(variable); rename one, or use --files"
            case .dangerous(let variable, _, _, let shared, true):
                "$\(variable) changes what programs load, run or trust"
                    + (shared ? ", and a value another user shares or may write may not set it; choose another name for --var, or use --files"
                              : "; choose another name for --var, or pass --allow-env \(variable) if you mean it")
            case .dangerous(let variable, let service, let item, let shared, false):
                "item '\(item)' of '\(service)' would become $\(variable), which changes what programs load, run or trust; "
                    + (shared ? "ask its owner to rename the item, or use --files"
                              : "rename the item, use --files, or pass --allow-env \(variable) if you mean it")
            case .nulByte(let service, let item):
                "item '\(item)' of '\(service)' contains a NUL byte and cannot be an environment variable; use --files"
            case .sharedNeedsNames:
                Self.sharedNeedsNamesMessage
            case .membersWriteValues(let service, let group):
                "members of group '\(group)' may write the values of '\(service)', so --env would let them choose what your command runs with: replace --env with --var NAME (or --var NAME=ITEM) for each, or use --files"
            case .namedTwice(let variable, let first, let second):
                "$\(variable) is named twice with --var, for '\(first.service)/\(first.item)' and '\(second.service)/\(second.item)'; give each its own name"
            case .noItem(let variable, let services):
                if let item = variable.item {
                    "no item '\(item)' in \(Self.quoted(services)) for $\(variable.name); list the items with '\(Self.listing) \(services.first ?? "SERVICE")'"
                } else {
                    "no item of \(Self.quoted(services)) becomes $\(variable.name); name it with --var \(variable.name)=ITEM (list the items with '\(Self.listing) \(services.first ?? "SERVICE")')"
                }
            case .ambiguous(let variable, let services):
                "$\(variable.name) could come from '\(services[0])' or '\(services[1])'; run one kc exec per service, or rename an item"
            }
        }

        /// How the caller lists the services' items: `kc ls`, with `--from OWNER` or
        /// `--group G` for services another user shares. Set by `kc exec`.
        nonisolated(unsafe) public static var listing = "kc ls"

        private static func quoted(_ services: [KeyName]) -> String {
            services.map { "'\($0)'" }.joined(separator: " or ")
        }

        /// Also the usage error `kc exec` gives before reading anything.
        public static let sharedNeedsNamesMessage =
            "a service another user shares sets only the variables you name: replace --env with --var NAME (or --var NAME=ITEM) for each, or use --files"
    }

    /// A variable the caller names: `NAME`, set from the item `--env` would turn into
    /// `NAME`, or `NAME=ITEM`, set from the item `ITEM`.
    public struct NamedVariable: Equatable, Sendable {
        public var name: String
        public var item: KeyName?

        /// Reads `--var`'s value as the caller wrote it, bytes and all (an item name
        /// need not be UTF-8). Returns nil for a name that is not `[A-Za-z_][A-Za-z0-9_]*`
        /// or an empty item.
        public init?(_ argument: KeyName) {
            let bytes = argument.bytes
            let equals = bytes.firstIndex(of: UInt8(ascii: "="))
            let nameBytes = bytes[..<(equals ?? bytes.endIndex)]
            guard let first = nameBytes.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
                  nameBytes.allSatisfy({ $0 == UInt8(ascii: "_") || Self.isASCIIAlphanumeric($0) }) else { return nil }
            name = String(decoding: nameBytes, as: UTF8.self)
            if let equals {
                guard equals + 1 < bytes.endIndex else { return nil }
                item = KeyName(bytes: bytes[(equals + 1)...])
            } else {
                item = nil
            }
        }

        public init(name: String, item: KeyName? = nil) {
            self.name = name
            self.item = item
        }

        private static func isASCIIAlphanumeric(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }

        func matches(_ candidate: PassedItem) -> Bool {
            if let item { return candidate.name == item }
            return EnvironmentNames.variable(for: candidate.name) == name
        }
    }

    /// `db.password` -> `DB_PASSWORD`: upper-cased, anything but ASCII letters and digits
    /// becomes `_`, and a leading digit gets a `_` in front (names cannot start with one).
    /// The core's rule (``ExecEnvironment/variableName(forItem:)``, which the front uses
    /// too); a name that is not UTF-8 is named from its decoded text (U+FFFD for each bad
    /// sequence, each one `_`), and the front hands such names over.
    static func variable(for item: KeyName) -> String {
        if let name = item.bytes.withUnsafeBytes({ ExecEnvironment.variableName(forItem: $0) }) {
            return String(decoding: name, as: UTF8.self)
        }
        var name = String(item.jsonText.unicodeScalars.map { scalar -> Character in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar))
                ? Character(String(scalar).uppercased()) : "_"
        })
        if let first = name.unicodeScalars.first, ("0"..."9").contains(first) { name = "_" + name }
        return name
    }

    /// The variables to set, each with the index in `items` of the item that fills it, in
    /// order: with `every`, one per item (`--env`), then the `named` ones (`--var`).
    ///
    /// Refuses `every` for a service another user shares; two items of one variable; a
    /// `--var` no item or two items answer; a dangerous name (compared upper-cased, since
    /// programs read `http_proxy` as well as `HTTP_PROXY`) unless it is in `allowed`,
    /// which only the owner of the services may pass; and then a value with a NUL byte.
    /// By index, so no copy of a value is made.
    public static func variables(for items: [PassedItem], of services: [KeyName] = [], every: Bool, named: [NamedVariable] = [],
                                 allowing allowed: [String], sharedByAnotherUser: Bool,
                                 writableByMembers: (service: KeyName, group: String)? = nil) throws(Refusal) -> [(name: String, index: Int)] {
        if every && sharedByAnotherUser { throw .sharedNeedsNames }
        if every, let writable = writableByMembers { throw .membersWriteValues(service: writable.service, group: writable.group) }
        let othersChoose = sharedByAnotherUser || writableByMembers != nil
        func refused(_ name: String) -> Bool {
            DangerousVariables.contains(name.uppercased()) && (othersChoose || !allowed.contains(name))
        }
        var byName: [String: (index: Int, namedByCaller: Bool)] = [:]
        var ordered: [(name: String, index: Int)] = []
        func add(_ name: String, _ index: Int, namedByCaller: Bool) throws(Refusal) {
            if let earlier = byName[name] {
                if earlier.index == index { return }
                let first = (items[earlier.index].service, items[earlier.index].name), second = (items[index].service, items[index].name)
                if namedByCaller && earlier.namedByCaller { throw .namedTwice(variable: name, first: first, second: second) }
                throw .collision(variable: name, first: first, second: second)
            }
            if refused(name) {
                throw .dangerous(variable: name, service: items[index].service, item: items[index].name,
                                 sharedByAnotherUser: othersChoose, namedByCaller: namedByCaller)
            }
            byName[name] = (index, namedByCaller)
            ordered.append((name, index))
        }
        if every {
            for index in items.indices { try add(variable(for: items[index].name), index, namedByCaller: false) }
        }
        for variable in named {
            // A name kc will not set is refused before any item is looked for: the way
            // out is another name, whatever items there are.
            if refused(variable.name) {
                throw .dangerous(variable: variable.name, service: services.first ?? KeyName(""), item: variable.item ?? KeyName(""),
                                 sharedByAnotherUser: othersChoose, namedByCaller: true)
            }
            let matching = items.indices.filter { variable.matches(items[$0]) }
            guard let index = matching.first else { throw .noItem(variable, services: services) }
            if let other = matching.dropFirst().first {
                guard items[other].service != items[index].service else {
                    // Two items of one service that --env would name alike.
                    throw .collision(variable: variable.name, first: (items[index].service, items[index].name),
                                     second: (items[other].service, items[other].name))
                }
                throw .ambiguous(variable, services: [items[index].service, items[other].service])
            }
            try add(variable.name, index, namedByCaller: true)
        }
        for (_, index) in ordered where items[index].value.contains(0) {
            throw .nulByte(service: items[index].service, item: items[index].name)
        }
        return ordered
    }
}
