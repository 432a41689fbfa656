import ArgumentParser
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension KC {
    struct Find: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Find services and items by name (never by value).",
            discussion: """
            PATTERN matches a service or an item name, ignoring case: as a part of the
            name, or, when it holds * ? or [, as a shell pattern for the whole name.
            Each match prints as SERVICE/ITEM, one per line, sorted; a service whose
            name matches prints every item (and SERVICE/ when it has none). Values are
            never read. Exits 1 when nothing matches.

              kc find github          # com.github/token, git:https/github.com/alice …
              kc find '*token*'

            Names print as 'kc ls' prints them (escaped at a terminal). --json:
            {"matches": [{"service": "name", "item": "name" or null}]}, with
            "serviceBase64"/"itemBase64" beside a name that is not UTF-8.
            """
        )

        @Argument(help: "A part of a name, or a shell pattern (*, ?, [...]).")
        var pattern: String

        @Flag(help: "Print JSON (see above).")
        var json = false

        func validate() throws {
            if pattern.isEmpty { throw ValidationError("the pattern is empty; 'kc ls' lists every service") }
        }

        func run() throws {
            let matcher = NameMatcher(try RawArguments.exactNames([pattern])[0])
            var matches: [Match] = []
            for service in try Keychain.services() {
                // A service that went away meanwhile, or that cannot be read, has nothing to show.
                let items = (try? Keychain(service: service).allKeyNames()) ?? []
                if matcher.matches(service) {
                    matches += items.isEmpty ? [Match(service: service, item: nil)] : items.map { Match(service: service, item: $0) }
                } else {
                    matches += items.filter(matcher.matches).map { Match(service: service, item: $0) }
                }
            }
            if json {
                try printJSON(MatchList(matches: matches))
            } else {
                try writeNames(matches.map { KeyName(bytes: $0.service.bytes + [UInt8(ascii: "/")] + ($0.item?.bytes ?? [])) })
            }
            if matches.isEmpty { throw ExitStatus.notFound }
        }
    }
}

/// `kc find`'s pattern: a shell pattern if it has a wildcard, else a part of the
/// name; case is ignored either way (ASCII letters).
struct NameMatcher {
    private let pattern: [UInt8]
    private let isShellPattern: Bool

    init(_ pattern: KeyName) {
        self.pattern = pattern.bytes
        isShellPattern = pattern.bytes.contains { $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "[") }
    }

    func matches(_ name: KeyName) -> Bool {
        let needle = pattern.map(Self.folded), haystack = name.bytes.map(Self.folded)
        if isShellPattern {
            // Both folded, so fnmatch needs no FNM_CASEFOLD (a GNU extension).
            return (needle + [0]).withUnsafeBufferPointer { glob in
                (haystack + [0]).withUnsafeBufferPointer { text in
                    glob.withMemoryRebound(to: CChar.self) { glob in
                        text.withMemoryRebound(to: CChar.self) { fnmatch(glob.baseAddress, $0.baseAddress, 0) == 0 }
                    }
                }
            }
        }
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { start in haystack[start..<(start + needle.count)].elementsEqual(needle) }
    }

    private static func folded(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }
}

private struct Match: Encodable {
    var service: KeyName
    var item: KeyName?

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(service, forKey: .service, base64Key: .serviceBase64)
        if let item { try container.encode(item, forKey: .item, base64Key: .itemBase64) } else { try container.encodeNil(forKey: .item) }
    }

    enum CodingKeys: String, CodingKey {
        case service, serviceBase64, item, itemBase64
    }
}

private struct MatchList: Encodable {
    var matches: [Match]
}
