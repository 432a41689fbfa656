#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Keychain {
    /// The item as text; assigning stores it, assigning nil removes it.
    ///
    /// Like KeychainAccess's subscripts, this cannot throw: a failed read is nil and a
    /// failed write is dropped. Use ``string(forKey:)`` and ``set(_:forKey:)-(String,_)``
    /// to see errors.
    public subscript(key: String) -> String? {
        get { (try? string(forKey: key)) ?? nil }
        nonmutating set {
            if let newValue { try? set(newValue, forKey: key) } else { _ = try? remove(key) }
        }
    }

    /// The item's bytes; assigning stores them, assigning nil removes the item.
    public subscript(bytes key: String) -> [UInt8]? {
        get { (try? data(forKey: key)) ?? nil }
        nonmutating set {
            if let newValue { try? set(newValue, forKey: key) } else { _ = try? remove(key) }
        }
    }

    /// Stores an `Encodable` value as JSON text.
    public func set<Value: Encodable>(json value: Value, forKey key: String) throws(KeychainError) {
        let encoded: Data
        do {
            encoded = try JSONEncoder().encode(value)
        } catch {
            throw .decodingFailed(item: key, reason: "the value cannot be encoded as JSON: \(error)")
        }
        var bytes = Array(encoded)
        defer { bytes.overwriteWithZeros() }
        try set(bytes, forKey: key)
    }

    /// Decodes the item from JSON, or returns nil if there is no such item.
    ///
    /// - Throws: ``KeychainError/decodingFailed(item:reason:)`` if the stored bytes are
    ///   not JSON of that type.
    public func json<Value: Decodable>(_ type: Value.Type, forKey key: String) throws(KeychainError) -> Value? {
        guard var bytes = try data(forKey: key) else { return nil }
        defer { bytes.overwriteWithZeros() }
        do {
            return try JSONDecoder().decode(type, from: Data(bytes))
        } catch {
            throw .decodingFailed(item: key, reason: "the value is not JSON of type \(type): \(error)")
        }
    }
}
