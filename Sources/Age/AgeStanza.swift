/// One recipient stanza of an age header, as text:
///
///     -> TYPE ARGUMENT…
///     base64 body, wrapped at 64 columns, ending with a line shorter than 64
///
/// This is the syntax only; `AgeX25519Stanza` and `AgeScryptStanza` give the two
/// types kc knows their meaning. Stanzas of other types are kept and ignored.
struct AgeStanza: Sendable, Equatable {
    /// The first argument, which names the recipient type (`X25519`, `scrypt`, …).
    var type: String
    /// The arguments after the type.
    var arguments: [String]
    /// The decoded body.
    var body: [UInt8]

    static let argumentLinePrefix: [UInt8] = Array("-> ".utf8)
    /// Body lines hold 64 base64 characters (48 bytes); the last one holds fewer.
    static let bodyLineLength = 64

    init(type: String, arguments: [String], body: [UInt8]) {
        self.type = type
        self.arguments = arguments
        self.body = body
    }

    /// Reads the stanza that starts at the reader's position (at its `-> `).
    init(readingFrom reader: inout AgeHeader.LineReader) throws(AgeError) {
        let argumentLine = try reader.nextLine()
        let words = argumentLine.dropFirst(Self.argumentLinePrefix.count)
            .split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        var strings: [String] = []
        strings.reserveCapacity(words.count)
        for word in words {
            // An argument is 1*VCHAR: no empty argument (two spaces), no control
            // character, nothing outside ASCII.
            guard !word.isEmpty, word.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw .malformedHeader("a stanza argument is empty or not printable ASCII")
            }
            strings.append(String(decoding: word, as: UTF8.self))
        }
        guard let type = strings.first else {
            throw .malformedHeader("a stanza has no type")
        }
        self.type = type
        self.arguments = Array(strings.dropFirst())

        var body: [UInt8] = []
        while true {
            let line = try reader.nextLine()
            guard line.count <= Self.bodyLineLength else {
                throw .malformedHeader("a stanza body line is longer than 64 columns")
            }
            guard let bytes = CanonicalBase64.decode(line) else {
                throw .malformedHeader("a stanza body line is not canonical unpadded base64 (or the stanza ended without a short line)")
            }
            body.append(contentsOf: bytes)
            if line.count < Self.bodyLineLength { break }
        }
        self.body = body
    }

    /// Appends the stanza as age writes it: the argument line, then the body in
    /// 64-column lines and a final shorter (possibly empty) line.
    func write(to header: inout [UInt8]) {
        header.append(contentsOf: Self.argumentLinePrefix)
        header.append(contentsOf: type.utf8)
        for argument in arguments {
            header.append(UInt8(ascii: " "))
            header.append(contentsOf: argument.utf8)
        }
        header.append(UInt8(ascii: "\n"))
        let text = CanonicalBase64.encode(body)
        var lineStart = 0
        while true {
            let lineEnd = min(lineStart + Self.bodyLineLength, text.count)
            header.append(contentsOf: text[lineStart..<lineEnd])
            header.append(UInt8(ascii: "\n"))
            if lineEnd - lineStart < Self.bodyLineLength { break }
            lineStart = lineEnd
        }
    }
}
