import Keyrings

/// The kc item a Secret Service item's value lives in: a service and an item name.
public struct ItemID: Hashable, Sendable, Comparable {
    public var service: KeyName
    public var name: KeyName

    public init(service: KeyName, name: KeyName) {
        self.service = service
        self.name = name
    }

    public static func < (a: ItemID, b: ItemID) -> Bool {
        a.service.bytes != b.service.bytes ? a.service.bytes.lexicographicallyPrecedes(b.service.bytes) : a.name.bytes.lexicographicallyPrecedes(b.name.bytes)
    }
}

/// What the Secret Service knows of an item besides its value, which the kernel holds:
/// the index keeps it, never a kernel key (an ordinary user's key quota is 20,000 bytes,
/// and a browser stores about 20 attributes per password).
public struct ItemRecord: Sendable, Equatable {
    public var id: ItemID
    /// The collection's name (`login`, `session`, or one a client made).
    public var collection: String
    public var attributes: [String: String]
    public var label: String
    public var contentType: String
    public var created: UInt64
    public var modified: UInt64
    /// The value is empty and the index alone holds it: kc-secretd before empty items
    /// (``Keyrings/ItemValue``) kept them so. New records hold false; an item the kernel
    /// holds is read from there first.
    public var isEmptyValue: Bool
}

/// A collection: a name in its object path, a label, and the level its new items take.
public struct CollectionRecord: Sendable, Equatable {
    public var name: String
    public var label: String
    public var created: UInt64
    public var modified: UInt64
    /// Whether a client made it (`CreateCollection`); `login` and `session` are kc's own.
    public var isCustom: Bool
}

/// kc-secretd's index: collections, aliases and item records. Saved whole: encrypted to
/// the vault's key as `documents/secret-service.age` (``Vault/updateDocument(_:alongside:_:)``),
/// or without a vault in a file of the boot's (``BootIndexFile``).
public struct SecretIndex: Sendable, Equatable {
    public var collections: [String: CollectionRecord] = [:]
    public var aliases: [String: String] = [:]
    public var items: [ItemID: ItemRecord] = [:]
    /// The kc services kc-secretd made for the items it stored (none existed): its own,
    /// so the Delete of their last item removes them on purpose, as `kc rm SERVICE` does
    /// (each is a key of the user's quota). A service another door made is never removed.
    public var ownedServices: Set<KeyName> = []

    public init() {}

    /// Version 2 added ``ownedServices``; version 1 is still read (it has none).
    static let magic = Array("kc-secret-service-index 2\n".utf8)
    static let firstMagic = Array("kc-secret-service-index 1\n".utf8)

    /// The index as bytes: the magic line, then length-prefixed fields (little-endian
    /// UInt32 lengths, UInt64 times).
    public func encoded() -> [UInt8] {
        var out = IndexWriter()
        out.raw(Self.magic)
        out.count(collections.count)
        for collection in collections.values.sorted(by: { $0.name < $1.name }) {
            out.text(collection.name)
            out.text(collection.label)
            out.number(collection.created)
            out.number(collection.modified)
            out.number(collection.isCustom ? 1 : 0)
        }
        out.count(aliases.count)
        for (alias, target) in aliases.sorted(by: { $0.key < $1.key }) {
            out.text(alias)
            out.text(target)
        }
        out.count(items.count)
        for item in items.values.sorted(by: { $0.id < $1.id }) {
            out.field(item.id.service.bytes)
            out.field(item.id.name.bytes)
            out.text(item.collection)
            out.count(item.attributes.count)
            for (key, value) in item.attributes.sorted(by: { $0.key < $1.key }) {
                out.text(key)
                out.text(value)
            }
            out.text(item.label)
            out.text(item.contentType)
            out.number(item.created)
            out.number(item.modified)
            out.number(item.isEmptyValue ? 1 : 0)
        }
        out.count(ownedServices.count)
        for service in ownedServices.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) { out.field(service.bytes) }
        return out.bytes
    }

    /// Reads what ``encoded()`` wrote (or a version 1 index); nil for anything else (a
    /// damaged or foreign file).
    public init?(decoding bytes: [UInt8]) {
        var reader = IndexReader(bytes: bytes)
        let magic = reader.raw(Self.magic.count)
        guard magic == Self.magic || magic == Self.firstMagic else { return nil }
        guard let collectionCount = reader.count() else { return nil }
        for _ in 0..<collectionCount {
            guard let name = reader.text(), let label = reader.text(), let created = reader.number(),
                  let modified = reader.number(), let custom = reader.number() else { return nil }
            collections[name] = CollectionRecord(name: name, label: label, created: created, modified: modified, isCustom: custom != 0)
        }
        guard let aliasCount = reader.count() else { return nil }
        for _ in 0..<aliasCount {
            guard let alias = reader.text(), let target = reader.text() else { return nil }
            aliases[alias] = target
        }
        guard let itemCount = reader.count() else { return nil }
        for _ in 0..<itemCount {
            guard let service = reader.field(), let name = reader.field(), let collection = reader.text(),
                  let attributeCount = reader.count() else { return nil }
            var attributes: [String: String] = [:]
            for _ in 0..<attributeCount {
                guard let key = reader.text(), let value = reader.text() else { return nil }
                attributes[key] = value
            }
            guard let label = reader.text(), let contentType = reader.text(), let created = reader.number(),
                  let modified = reader.number(), let empty = reader.number() else { return nil }
            let id = ItemID(service: KeyName(bytes: service), name: KeyName(bytes: name))
            items[id] = ItemRecord(id: id, collection: collection, attributes: attributes, label: label, contentType: contentType,
                                   created: created, modified: modified, isEmptyValue: empty != 0)
        }
        if magic == Self.magic {
            guard let serviceCount = reader.count() else { return nil }
            for _ in 0..<serviceCount {
                guard let service = reader.field() else { return nil }
                ownedServices.insert(KeyName(bytes: service))
            }
        }
        guard reader.isAtEnd else { return nil }
    }
}

private struct IndexWriter {
    var bytes: [UInt8] = []

    mutating func raw(_ data: [UInt8]) { bytes += data }

    mutating func number(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    mutating func count(_ value: Int) {
        withUnsafeBytes(of: UInt32(value).littleEndian) { bytes += $0 }
    }

    mutating func field(_ data: [UInt8]) {
        count(data.count)
        bytes += data
    }

    mutating func text(_ value: String) { field(Array(value.utf8)) }
}

private struct IndexReader {
    let bytes: [UInt8]
    var offset = 0

    var isAtEnd: Bool { offset == bytes.count }

    mutating func raw(_ count: Int) -> [UInt8]? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func number() -> UInt64? {
        guard let raw = raw(8) else { return nil }
        return raw.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func count() -> Int? {
        guard let raw = raw(4) else { return nil }
        let value = raw.reversed().reduce(0) { $0 << 8 | Int($1) }
        // No count can exceed what is left to read: a damaged count fails here, not as a huge allocation.
        return value <= bytes.count - offset ? value : nil
    }

    mutating func field() -> [UInt8]? {
        guard let count = count() else { return nil }
        return raw(count)
    }

    mutating func text() -> String? {
        guard let field = field() else { return nil }
        return String(validating: field, as: UTF8.self)
    }
}
