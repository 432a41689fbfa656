import KernelKeychain
import Keyrings

/// The variables `kc exec --env` makes of items: `db.password` becomes `DB_PASSWORD`,
/// and an item that would make a variable in ``DangerousVariables``, clash with another
/// item's, or hold a NUL byte is refused.
public enum EnvironmentNames {
    /// Why the items cannot all become variables: `message` is the line after `kc: `,
    /// naming the item and the way out; it never holds a value.
    public enum Refusal: Error {
        /// Two items become the same variable.
        case collision(variable: String, first: (service: KeyName, item: KeyName), second: (service: KeyName, item: KeyName))
        /// The item would set a variable that changes what programs load, run or trust.
        case dangerous(variable: String, service: KeyName, item: KeyName, sharedByAnotherUser: Bool)
        /// An environment string cannot hold a NUL byte.
        case nulByte(service: KeyName, item: KeyName)

        public var message: String {
            switch self {
            case .collision(let variable, let first, let second):
                "items '\(first.service)/\(first.item)' and '\(second.service)/\(second.item)' both become $\(variable); rename one, or use --files"
            case .dangerous(let variable, let service, let item, let shared):
                "item '\(item)' of '\(service)' would become $\(variable), which changes what programs load, run or trust; "
                    + (shared ? "ask its owner to rename the item, or use --files"
                              : "rename the item, use --files, or pass --allow-env \(variable) if you mean it")
            case .nulByte(let service, let item):
                "item '\(item)' of '\(service)' contains a NUL byte and cannot be an environment variable; use --files"
            }
        }
    }

    /// `db.password` -> `DB_PASSWORD`: upper-cased, anything but ASCII letters and digits
    /// becomes `_`, and a leading digit gets a `_` in front (names cannot start with one).
    static func variable(for item: KeyName) -> String {
        var name = String(item.jsonText.unicodeScalars.map { scalar -> Character in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar))
                ? Character(String(scalar).uppercased()) : "_"
        })
        if let first = name.unicodeScalars.first, ("0"..."9").contains(first) { name = "_" + name }
        return name
    }

    /// Each item's variable name, with the item's index in `items`, in order. Refuses
    /// two items of one name, a dangerous name not in `allowed` (which only the owner of
    /// the services may pass: `sharedByAnotherUser` words the refusal), and then a value
    /// with a NUL byte. By index, so no copy of a value is made.
    public static func variables(for items: [PassedItem], allowing allowed: [String],
                                 sharedByAnotherUser: Bool) throws(Refusal) -> [(name: String, index: Int)] {
        var byName: [String: Int] = [:]
        var ordered: [(name: String, index: Int)] = []
        for (index, item) in items.enumerated() {
            let name = variable(for: item.name)
            if let earlier = byName[name] {
                throw .collision(variable: name, first: (items[earlier].service, items[earlier].name), second: (item.service, item.name))
            }
            if DangerousVariables.contains(name) && !allowed.contains(name) {
                throw .dangerous(variable: name, service: item.service, item: item.name, sharedByAnotherUser: sharedByAnotherUser)
            }
            byName[name] = index
            ordered.append((name, index))
        }
        for (_, index) in ordered where items[index].value.contains(0) {
            throw .nulByte(service: items[index].service, item: items[index].name)
        }
        return ordered
    }
}
