/// The age v1 file format (age-encryption.org/v1, C2SP age.md) on swift-crypto:
/// encryption to X25519 recipients (`age1…`) or to a passphrase (scrypt), and
/// decryption with X25519 identities (`AGE-SECRET-KEY-1…`) or a passphrase.
/// Files are binary (no ASCII armor) and interoperate with the `age` command.
///
/// Decryption is all or nothing: the plaintext is returned only once every chunk
/// has authenticated, and nothing decrypted before a failure is kept.
public enum Age {
    /// The highest scrypt work factor (as logN) that decryption accepts unless told
    /// otherwise, and that encryption writes: Debian's age 1.1.1 refuses more.
    public static let defaultMaximumLogN = 22

    // MARK: Encryption

    /// Encrypts `plaintext` to every recipient: any one of their identities can
    /// decrypt the result. The recipients' order is the stanzas' order.
    public static func encrypt(
        _ plaintext: UnsafeRawBufferPointer, to recipients: [AgeX25519Recipient]
    ) throws(AgeError) -> [UInt8] {
        guard !recipients.isEmpty else { throw .noRecipients }
        let fileKey = FileKey.generate()
        var stanzas: [AgeStanza] = []
        stanzas.reserveCapacity(recipients.count)
        for recipient in recipients {
            stanzas.append(try AgeX25519Stanza.wrap(fileKey, to: recipient))
        }
        return try assemble(stanzas: stanzas, fileKey: fileKey, plaintext: plaintext)
    }

    /// Encrypts `plaintext` to every recipient (see the `UnsafeRawBufferPointer` form).
    public static func encrypt(_ plaintext: [UInt8], to recipients: [AgeX25519Recipient]) throws(AgeError) -> [UInt8] {
        try withBytes(of: plaintext) { bytes throws(AgeError) in try encrypt(bytes, to: recipients) }
    }

    /// Encrypts `plaintext` with a passphrase, as `age -p` does: one scrypt stanza
    /// with a fresh salt and work factor 2^`logN` (age's default is 18, about a
    /// second of work and 256 MiB). `logN` must be 1…``defaultMaximumLogN``, so that
    /// `age` and ``decrypt(_:passphrase:maximumLogN:)`` with its default can read the file.
    public static func encrypt(_ plaintext: [UInt8], passphrase: [UInt8], logN: Int = 18) throws(AgeError) -> [UInt8] {
        guard !passphrase.isEmpty else { throw .emptyPassphrase }
        guard logN >= 1 else { throw .invalidWorkFactor(logN: logN) }
        guard logN <= defaultMaximumLogN else {
            throw .workFactorTooHigh(logN: logN, maximum: defaultMaximumLogN)
        }
        let fileKey = FileKey.generate()
        let stanza = try AgeScryptStanza.wrap(fileKey, passphrase: passphrase, logN: logN)
        return try withBytes(of: plaintext) { bytes throws(AgeError) in
            try assemble(stanzas: [stanza], fileKey: fileKey, plaintext: bytes)
        }
    }

    // MARK: Decryption

    /// Decrypts a file with whichever identity matches one of its X25519 stanzas.
    ///
    /// Throws ``AgeError/noMatchingIdentity`` when none does, including for a
    /// passphrase-encrypted file (identities never unwrap scrypt stanzas).
    public static func decrypt(_ file: [UInt8], identities: [AgeX25519Identity]) throws(AgeError) -> [UInt8] {
        let header = try AgeHeader(parsing: file)
        let fileKey = try unwrapFileKey(header, identities: identities)
        try header.verifyMAC(of: file, fileKey: fileKey)
        return try AgePayload.decrypt(file, from: header.payloadStart, fileKey: fileKey)
    }

    /// Decrypts a passphrase-encrypted file.
    ///
    /// Throws ``AgeError/noMatchingIdentity`` for a wrong passphrase and for a file
    /// encrypted to X25519 recipients, and ``AgeError/workFactorTooHigh(logN:maximum:)``
    /// before doing any work when the file asks for more than 2^`maximumLogN`.
    public static func decrypt(_ file: [UInt8], passphrase: [UInt8], maximumLogN: Int = 22) throws(AgeError) -> [UInt8] {
        guard !passphrase.isEmpty else { throw .emptyPassphrase }
        let header = try AgeHeader(parsing: file)
        guard let stanza = header.scryptStanza,
              let fileKey = try stanza.unwrap(passphrase: passphrase, maximumLogN: maximumLogN)
        else { throw .noMatchingIdentity }
        try header.verifyMAC(of: file, fileKey: fileKey)
        return try AgePayload.decrypt(file, from: header.payloadStart, fileKey: fileKey)
    }

    // MARK: Keys and inspection

    /// Identities in an identity file's text: one AGE-SECRET-KEY-1 per line, '#' comments and blank lines ignored.
    ///
    /// Lines may end in CRLF. A file with no identity at all is an error, as it is
    /// for `age -i`; so is any other line, named by its number (never its text).
    public static func identities(inIdentityFile text: [UInt8]) throws(AgeError) -> [AgeX25519Identity] {
        var identities: [AgeX25519Identity] = []
        var lineNumber = 0
        for var line in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            lineNumber += 1
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.isEmpty || line.first == UInt8(ascii: "#") { continue }
            do {
                identities.append(try AgeX25519Identity(parsingASCII: line))
            } catch {
                let reason = if case .invalidKey(let reason) = error { reason } else { error.description }
                throw .invalidKey("identity file line \(lineNumber): \(reason)")
            }
        }
        guard !identities.isEmpty else {
            throw .invalidKey("the identity file holds no AGE-SECRET-KEY-1… line")
        }
        return identities
    }

    /// logN of a file's scrypt stanza, nil if it has none (for `kc vault status`).
    ///
    /// Reads the header only (it is checked as for decryption, but nothing is
    /// unwrapped, so no key is needed).
    public static func scryptWorkFactor(of file: [UInt8]) throws(AgeError) -> Int? {
        try AgeHeader(parsing: file).scryptStanza?.logN
    }

    // MARK: Internals

    /// Tries each identity against each X25519 stanza, identities first, as age does.
    private static func unwrapFileKey(_ header: AgeHeader, identities: [AgeX25519Identity]) throws(AgeError) -> FileKey {
        for identity in identities {
            for stanza in header.x25519Stanzas {
                if let fileKey = try stanza.unwrap(with: identity) { return fileKey }
            }
        }
        throw .noMatchingIdentity
    }

    /// Header and payload, written into one buffer of the final size.
    private static func assemble(
        stanzas: [AgeStanza], fileKey: FileKey, plaintext: UnsafeRawBufferPointer
    ) throws(AgeError) -> [UInt8] {
        var file = AgeHeader.encode(stanzas: stanzas, fileKey: fileKey)
        file.reserveCapacity(file.count + AgePayload.encryptedSize(ofPlaintextCount: plaintext.count))
        try AgePayload.encrypt(plaintext, fileKey: fileKey, appendingTo: &file)
        return file
    }

    /// `body` over the array's bytes, keeping typed throws (the standard library's
    /// `withUnsafeBytes` rethrows untyped).
    private static func withBytes<Result>(
        of bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(AgeError) -> Result
    ) throws(AgeError) -> Result {
        let outcome: Swift.Result<Result, AgeError> = bytes.withUnsafeBytes { buffer in
            do throws(AgeError) { return .success(try body(buffer)) } catch { return .failure(error) }
        }
        return try outcome.get()
    }
}
