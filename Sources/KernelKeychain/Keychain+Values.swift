import Keyrings

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Keychain {
    /// The item as text; assigning stores it (`""` too, as in Apple's keychain), assigning
    /// nil removes it.
    ///
    /// Like KeychainAccess's subscripts, this cannot throw: a failed read is nil. An
    /// assignment never leaves the old value to be served: a value that cannot be stored
    /// (over 32767 bytes, quota full, ...) removes the old one, so a read afterwards gives
    /// what was assigned or nil, never a stale secret. Use ``set(_:forKey:)-(String,_)``, which throws and
    /// changes nothing on failure, to see errors.
    ///
    /// The kernel calls are those of ``set(_:forKey:)-(String,_)`` (`add_key`), and
    /// `keyctl_unlink` of ``remove(_:)`` for a removal.
    public subscript(key: some KeyNameConvertible) -> String? {
        get { (try? string(forKey: key)) ?? nil }
        nonmutating set {
            guard let newValue else { return assignRemoving(key) }
            do { try set(newValue, forKey: key) } catch { assignRemoving(key) }
        }
    }

    /// The item's bytes; assigning stores them (`[]` too), assigning nil removes the item.
    ///
    /// Assignment behaves as for the text subscript: a value that cannot be stored
    /// removes the old one rather than leaving it to be served. Use
    /// ``set(_:forKey:)-(Bytes,_)`` to see errors.
    public subscript(bytes key: some KeyNameConvertible) -> [UInt8]? {
        get { (try? data(forKey: key)) ?? nil }
        nonmutating set {
            guard let newValue else { return assignRemoving(key) }
            do { try set(newValue, forKey: key) } catch { assignRemoving(key) }
        }
    }

    /// The removal an assignment falls back to; it cannot throw either.
    private func assignRemoving(_ key: some KeyNameConvertible) {
        _ = try? remove(key)
    }

    /// Stores an `Encodable` value as JSON text; nil (an `Optional` that is `.none`, even
    /// when the caller is generic over the value's type) removes the item, as in Lockbox
    /// and FXKeychain, rather than storing the text `null`.
    ///
    /// The kernel calls are those of ``set(_:forKey:)-(Bytes,_)``, or of ``remove(_:)``
    /// for nil.
    /// - Throws: ``KeychainError/decodingFailed(item:reason:)`` if the value cannot be
    ///   encoded, and the errors of ``set(_:forKey:)-(Bytes,_)`` and ``remove(_:)``.
    public func set<Value: Encodable>(json value: Value, forKey key: some KeyNameConvertible) throws(KeychainError) {
        if let optional = value as? any OptionalValue, optional.isNone {
            try remove(key)
            return
        }
        let encoded: Data
        do {
            encoded = try JSONEncoder().encode(value)
        } catch {
            throw .decodingFailed(item: key.keyName.description, reason: "the value cannot be encoded as JSON: \(error)")
        }
        var bytes = Array(encoded)
        defer { bytes.overwriteWithZeros() }
        try set(bytes, forKey: key)
    }

    /// Decodes the item from JSON, or returns nil if there is no such item.
    ///
    /// - Throws: ``KeychainError/decodingFailed(item:reason:)`` if the stored bytes are
    ///   not JSON of that type.
    public func json<Value: Decodable>(_ type: Value.Type, forKey key: some KeyNameConvertible) throws(KeychainError) -> Value? {
        guard var bytes = try data(forKey: key) else { return nil }
        defer { bytes.overwriteWithZeros() }
        do {
            return try JSONDecoder().decode(type, from: Data(bytes))
        } catch {
            throw .decodingFailed(item: key.keyName.description, reason: "the value is not JSON of type \(type): \(error)")
        }
    }
}

/// An `Optional` seen through a generic parameter, so ``Keychain/set(json:forKey:)`` can
/// tell nil from a value.
private protocol OptionalValue {
    /// Whether this is nil, looking through nested optionals (`.some(nil)` is nil too).
    var isNone: Bool { get }
}

extension Optional: OptionalValue {
    fileprivate var isNone: Bool {
        switch self {
        case .none: true
        case .some(let wrapped): (wrapped as? any OptionalValue)?.isNone ?? false
        }
    }
}
