import Crypto

/// The textual header of an age v1 file: the version line, one or more recipient
/// stanzas, and the MAC line.
///
///     age-encryption.org/v1
///     -> X25519 XEl0dJ6y3C7KZkgmgWUicg63EyXJiwBJW8PdYJ/cYBE
///     qRS0AMjdjPvZ/WT08U2KL4G+PIooA3hy38SvLpvaC1E
///     --- HK2NmOBN9Dpq0Gw6xMCuhFcQlQLvZ/wQUi/2scLG75s
///
/// The MAC is HMAC-SHA-256, keyed by the file key's header key, over every byte
/// from the start up to and including the `---`.
struct AgeHeader: Sendable {
    static let versionLine: [UInt8] = Array("age-encryption.org/v1".utf8)
    static let versionPrefix: [UInt8] = Array("age-encryption.org/".utf8)
    static let macLinePrefix: [UInt8] = Array("---".utf8)
    static let macByteCount = 32

    /// Every stanza, in file order, unknown types included.
    var stanzas: [AgeStanza]
    /// The X25519 stanzas, already checked to be well formed.
    var x25519Stanzas: [AgeX25519Stanza]
    /// The scrypt stanza, already checked to be well formed and the only stanza.
    var scryptStanza: AgeScryptStanza?
    /// The MAC the file carries.
    var mac: [UInt8]
    /// The bytes the MAC covers: the header up to and including `---`.
    var authenticatedBytes: Range<Int>
    /// Where the payload (its nonce first) starts.
    var payloadStart: Int

    /// Parses and checks the header at the start of `file`: the syntax, and the
    /// arguments and body lengths of X25519 and scrypt stanzas, which are header
    /// failures whatever key is later tried.
    init(parsing file: [UInt8]) throws(AgeError) {
        var reader = LineReader(file)
        let version = try reader.nextLine()
        guard version.elementsEqual(Self.versionLine) else {
            if version.elementsEqual(Self.versionLine + [UInt8(ascii: "\r")]) {
                throw .malformedHeader("the header's lines end in CR LF (was the file converted as text?); age uses LF")
            }
            if version.starts(with: Self.versionPrefix) {
                throw .malformedHeader("unsupported age format version (only age-encryption.org/v1 is known)")
            }
            throw .malformedHeader("the first line is not 'age-encryption.org/v1'")
        }
        var stanzas: [AgeStanza] = []
        while true {
            if reader.remaining.starts(with: AgeStanza.argumentLinePrefix) {
                stanzas.append(try AgeStanza(readingFrom: &reader))
            } else if reader.remaining.starts(with: Self.macLinePrefix) {
                break
            } else if reader.remaining.isEmpty {
                throw .malformedHeader("the header ends before its '---' MAC line")
            } else {
                throw .malformedHeader("a header line starts with neither '-> ' nor '---'")
            }
        }
        guard !stanzas.isEmpty else {
            throw .malformedHeader("the header has no recipient stanza")
        }
        authenticatedBytes = 0..<(reader.position + Self.macLinePrefix.count)
        let macLine = try reader.nextLine()
        let encodedMACLength = CanonicalBase64.encodedLength(ofByteCount: Self.macByteCount)
        guard macLine.count == Self.macLinePrefix.count + 1 + encodedMACLength,
              macLine[macLine.startIndex + Self.macLinePrefix.count] == UInt8(ascii: " "),
              let mac = CanonicalBase64.decode(macLine.suffix(encodedMACLength))
        else {
            throw .malformedHeader("the MAC line is not '--- ' and 43 characters of canonical base64")
        }
        self.mac = mac
        self.payloadStart = reader.position
        self.stanzas = stanzas

        var x25519Stanzas: [AgeX25519Stanza] = []
        var scryptStanza: AgeScryptStanza?
        for stanza in stanzas {
            switch stanza.type {
            case AgeX25519Stanza.type:
                x25519Stanzas.append(try AgeX25519Stanza(validating: stanza))
            case AgeScryptStanza.type:
                // Passphrase encryption promises that only the passphrase's holder
                // wrote the file; another stanza beside it would break that.
                guard stanzas.count == 1 else {
                    throw .malformedHeader("an scrypt stanza is not the only stanza in the header")
                }
                scryptStanza = try AgeScryptStanza(validating: stanza)
            default:
                continue
            }
        }
        self.x25519Stanzas = x25519Stanzas
        self.scryptStanza = scryptStanza
    }

    /// Throws `headerMACMismatch` unless the file's MAC is the one `fileKey` gives.
    func verifyMAC(of file: [UInt8], fileKey: FileKey) throws(AgeError) {
        let valid = HMAC<SHA256>.isValidAuthenticationCode(
            mac, authenticating: file[authenticatedBytes], using: fileKey.headerMACKey
        )
        guard valid else { throw .headerMACMismatch }
    }

    /// The header text for `stanzas`, its MAC made with `fileKey`.
    static func encode(stanzas: [AgeStanza], fileKey: FileKey) -> [UInt8] {
        var header: [UInt8] = []
        header.reserveCapacity(128 * stanzas.count + 80)
        header.append(contentsOf: versionLine)
        header.append(UInt8(ascii: "\n"))
        for stanza in stanzas { stanza.write(to: &header) }
        header.append(contentsOf: macLinePrefix)
        let mac = HMAC<SHA256>.authenticationCode(for: header, using: fileKey.headerMACKey)
        header.append(UInt8(ascii: " "))
        header.append(contentsOf: CanonicalBase64.encode(Array(mac)))
        header.append(UInt8(ascii: "\n"))
        return header
    }

    /// Reads a byte buffer line by line; a line ends at LF, which it does not include.
    struct LineReader {
        private let bytes: [UInt8]
        /// The index of the next unread byte.
        private(set) var position: Int

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
            self.position = bytes.startIndex
        }

        /// The bytes not read yet.
        var remaining: ArraySlice<UInt8> { bytes[position...] }

        /// The next line without its LF. A header whose last line has no LF is
        /// truncated: every header line, the MAC line included, ends with one.
        mutating func nextLine() throws(AgeError) -> ArraySlice<UInt8> {
            guard let lineFeed = bytes[position...].firstIndex(of: UInt8(ascii: "\n")) else {
                throw .malformedHeader(position == bytes.endIndex
                    ? "the file ends inside its header"
                    : "a header line is not terminated by a line feed")
            }
            defer { position = lineFeed + 1 }
            return bytes[position..<lineFeed]
        }
    }
}
