import Keyrings

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One item as an export carries it. Device-only items are never exported.
public struct ExportedItem: Sendable, Hashable {
    public var service: KeyName
    public var name: KeyName
    public var level: Accessibility.Level
    /// When the item expires (restored on import, so an export and import never make
    /// it live longer, however far apart); nil for no expiry.
    public var deadline: Deadline?
    public var value: [UInt8]

    /// The expiry left now; nil for none.
    public var secondsLeft: UInt64? { deadline?.secondsLeft }

    /// An item to import; `service` and `name` may be `String`s (their UTF-8 bytes) or ``KeyName``s.
    public init(service: some KeyNameConvertible, name: some KeyNameConvertible, level: Accessibility.Level,
                deadline: Deadline?, value: [UInt8]) {
        self.service = service.keyName
        self.name = name.keyName
        self.level = level
        self.deadline = deadline
        self.value = value
    }

    /// An item whose expiry is counted from now.
    public init(service: some KeyNameConvertible, name: some KeyNameConvertible, level: Accessibility.Level,
                secondsLeft: UInt64?, value: [UInt8]) {
        self.init(service: service, name: name, level: level, deadline: secondsLeft.map(Deadline.fromNow(seconds:)), value: value)
    }
}

/// Why an archive was rejected: where (a JSON path such as `items[2].value`, or
/// `line 7`) and what is wrong. Nothing is imported from a rejected archive.
public struct ArchiveError: Error, Sendable, Equatable, CustomStringConvertible {
    public var location: String
    public var problem: String

    public init(location: String, problem: String) {
        self.location = location
        self.problem = problem
    }

    public var description: String { "\(location): \(problem)" }
}

/// The JSON export format, version 1 (stable; documented in the README):
///
///     {"format": "kc-export", "version": 1,
///      "items": [{"service": "com.x", "name": "token", "access": "when-unlocked",
///                 "secondsLeft": null, "expiresAt": null, "value": "<base64 of the exact bytes>"}]}
///
/// A service or item name that is not UTF-8 also has `serviceBase64` or `nameBase64`,
/// its exact bytes, which an import uses (see ``KeyName/jsonBase64``).
/// `expiresAt` (seconds since the epoch) is the deadline an import restores; an archive
/// without it (kc before 0.3, or written by hand) counts `secondsLeft` from the import.
public enum KeychainArchive {
    public static let formatName = "kc-export"
    public static let version = 1

    public static func encodeJSON(_ items: [ExportedItem]) -> [UInt8] {
        let archive = Archive(format: formatName, version: version, items: items.map(ArchivedItem.init))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding plain strings, numbers and nulls cannot fail.
        return (try? Array(encoder.encode(archive))).map { $0 + [UInt8(ascii: "\n")] } ?? []
    }

    /// Parses and checks a whole archive: every name, value, level and timeout, and that
    /// no item is named twice, so an import can refuse a bad file before it writes anything.
    public static func decodeJSON(_ bytes: [UInt8]) throws(ArchiveError) -> [ExportedItem] {
        let archive: Archive
        do {
            archive = try JSONDecoder().decode(Archive.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw ArchiveError(decoding: error)
        } catch {
            throw ArchiveError(location: "(document)", problem: "\(error)")
        }
        guard archive.format == formatName else {
            throw ArchiveError(location: "format", problem: "is '\(archive.format)', not '\(formatName)'")
        }
        guard archive.version == version else {
            throw ArchiveError(location: "version", problem: "is \(archive.version); this kc reads version \(version)")
        }
        let items = archive.items.map(\.item)
        try refuseDuplicates(items)
        return items
    }

    /// An archive that names one item twice leaves which value wins to a guess, so it is
    /// refused whole, as a dotenv file that sets a name twice is. Names are compared byte
    /// for byte, as the kernel compares key descriptions: NFC and NFD "café" are two
    /// items, though Swift's `==` calls them equal.
    private static func refuseDuplicates(_ items: [ExportedItem]) throws(ArchiveError) {
        struct Identity: Hashable {
            var service: KeyName
            var name: KeyName
        }
        var firstIndex: [Identity: Int] = [:]
        for (index, item) in items.enumerated() {
            let identity = Identity(service: item.service, name: item.name)
            if let first = firstIndex[identity] {
                throw ArchiveError(location: "items[\(index)]", problem:
                    "names item '\(item.service)/\(item.name)' again (first in items[\(first)]); remove one of them")
            }
            firstIndex[identity] = index
        }
    }

    private struct Archive: Codable {
        var format: String
        var version: Int
        var items: [ArchivedItem]

        init(format: String, version: Int, items: [ArchivedItem]) {
            self.format = format
            self.version = version
            self.items = items
        }

        enum CodingKeys: String, CodingKey { case format, version, items }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            format = try container.decode(String.self, forKey: .format)
            // Any number but a whole one that fits is refused below as another version.
            guard let version = try container.decodeWholeNumber(forKey: .version, in: Int64(Int.min)...Int64(Int.max), problem: {
                "is \($0); this kc reads version \(KeychainArchive.version)"
            }) else {
                throw DecodingError.keyNotFound(CodingKeys.version, .init(codingPath: [], debugDescription: "is missing"))
            }
            self.version = Int(version)
            items = try container.decode([ArchivedItem].self, forKey: .items)
        }
    }

    private struct ArchivedItem: Codable {
        var item: ExportedItem

        init(_ item: ExportedItem) { self.item = item }

        enum CodingKeys: String, CodingKey { case service, serviceBase64, name, nameBase64, access, secondsLeft, expiresAt, value }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            func name(_ key: CodingKeys, _ base64Key: CodingKeys, as kind: NameKind) throws -> KeyName {
                let text = try container.decode(String.self, forKey: key)
                guard let name = KeyName(jsonText: text, base64: try container.decodeIfPresent(String.self, forKey: base64Key)) else {
                    throw DecodingError.dataCorruptedError(forKey: base64Key, in: container, debugDescription: "is not base64")
                }
                do { try validateName(name, as: kind) } catch {
                    throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "\(error)")
                }
                return name
            }
            let service = try name(.service, .serviceBase64, as: .service)
            let name = try name(.name, .nameBase64, as: .item)
            let accessText = try container.decode(String.self, forKey: .access)
            guard let level = Accessibility.Level(rawValue: accessText) else {
                throw DecodingError.dataCorruptedError(forKey: .access, in: container, debugDescription:
                    "'\(accessText)' is not when-unlocked, after-first-unlock or always")
            }
            let which = "item '\(service)/\(name)'"
            let secondsLeft = try container.decodeWholeNumber(forKey: .secondsLeft, in: 1...Int64(UInt32.max)) {
                "is \($0) for \(which); it must be null or a whole number of seconds from 1 to \(UInt32.max)"
            }.map(UInt64.init)
            let encoded = try container.decode(String.self, forKey: .value)
            guard let data = Data(base64Encoded: encoded) else {
                throw DecodingError.dataCorruptedError(forKey: .value, in: container, debugDescription: "is not base64")
            }
            guard data.count <= KeychainError.maximumValueSize else {
                throw DecodingError.dataCorruptedError(forKey: .value, in: container, debugDescription:
                    "holds \(data.count) bytes; a value is 0-\(KeychainError.maximumValueSize) bytes")
            }
            let expiresAt = try container.decodeWholeNumber(forKey: .expiresAt, in: 1...Int64.max) {
                "is \($0) for \(which); it must be null or a positive whole number of seconds since the epoch (1970)"
            }
            let deadline = expiresAt.map { Deadline(secondsSinceEpoch: $0) } ?? secondsLeft.map(Deadline.fromNow(seconds:))
            item = ExportedItem(service: service, name: name, level: level, deadline: deadline, value: Array(data))
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(item.service, forKey: .service, base64Key: .serviceBase64)
            try container.encode(item.name, forKey: .name, base64Key: .nameBase64)
            try container.encode(item.level.rawValue, forKey: .access)
            try container.encode(item.secondsLeft, forKey: .secondsLeft)
            try container.encode(item.deadline?.secondsSinceEpoch, forKey: .expiresAt)
            try container.encode(Data(item.value).base64EncodedString(), forKey: .value)
        }
    }
}

extension KeyedDecodingContainer {
    /// The whole number at `key` if it lies in `range`; nil if the key is absent or null.
    /// Anything else throws a `dataCorrupted` error at the key, worded by `problem`
    /// from the number as written (`-5`, `1.5`) or `not a number`. (Foundation's
    /// decoder reports a number that does not fit the type asked for, such as -5 asked
    /// as an unsigned number or 1.5 as an integer, as "not valid JSON" for the whole
    /// document, which names neither the field nor the item.)
    func decodeWholeNumber(forKey key: Key, in range: ClosedRange<Int64>,
                           problem: (String) -> String) throws -> Int64? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        let shown: String
        if let whole = try? decode(Int64.self, forKey: key) {
            if range.contains(whole) { return whole }
            shown = String(whole)
        } else if let number = try? decode(Double.self, forKey: key) {
            shown = "\(number)"
        } else {
            shown = "not a number"
        }
        throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: problem(shown))
    }
}

extension ArchiveError {
    /// A decoding error as the JSON path of the fault, e.g. `items[2].value`.
    init(decoding error: DecodingError) {
        func path(_ keys: [any CodingKey]) -> String {
            var text = ""
            for key in keys {
                if let index = key.intValue { text += "[\(index)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
            }
            return text.isEmpty ? "(document)" : text
        }
        switch error {
        case .dataCorrupted(let context):
            self.init(location: path(context.codingPath), problem: context.debugDescription)
        case .keyNotFound(let key, let context):
            let location = path(context.codingPath + [key])
            self.init(location: location, problem: "is missing")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            self.init(location: path(context.codingPath), problem: "expected \(type)")
        @unknown default:
            self.init(location: "(document)", problem: "\(error)")
        }
    }
}
