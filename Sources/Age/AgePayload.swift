import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The binary payload after the header: a 16-byte random nonce, then the plaintext
/// in 64 KiB chunks, each sealed with ChaCha20-Poly1305 under the payload key
/// (HKDF-SHA-256(file key, salt: nonce, info: "payload")). A chunk's AEAD nonce is
/// its 11-byte big-endian index and a flag byte, 1 on the final chunk and 0 before
/// it (the STREAM construction), so chunks cannot be dropped, reordered or added.
enum AgePayload {
    static let nonceByteCount = 16
    static let chunkSize = 64 * 1024
    static let tagByteCount = 16
    static let encryptedChunkSize = chunkSize + tagByteCount

    /// How many chunks a plaintext of `count` bytes takes: at least one, and a
    /// final chunk of exactly 64 KiB is the final chunk (no empty chunk after it).
    static func chunkCount(ofPlaintextCount count: Int) -> Int {
        max(1, (count + chunkSize - 1) / chunkSize)
    }

    /// The payload's size for a plaintext of `count` bytes, nonce included.
    static func encryptedSize(ofPlaintextCount count: Int) -> Int {
        nonceByteCount + count + chunkCount(ofPlaintextCount: count) * tagByteCount
    }

    /// Appends the nonce and the sealed chunks of `plaintext` to `output`.
    static func encrypt(
        _ plaintext: UnsafeRawBufferPointer, fileKey: FileKey, appendingTo output: inout [UInt8]
    ) throws(AgeError) {
        var generator = SystemRandomNumberGenerator()
        var nonce = [UInt8](repeating: 0, count: nonceByteCount)
        for index in nonce.indices { nonce[index] = generator.next() }
        output.append(contentsOf: nonce)
        let payloadKey = fileKey.payloadKey(nonce: nonce)
        let chunks = chunkCount(ofPlaintextCount: plaintext.count)
        for chunk in 0..<chunks {
            let start = chunk * chunkSize
            let end = min(start + chunkSize, plaintext.count)
            let chunkPlaintext = UnsafeRawBufferPointer(rebasing: plaintext[start..<end])
            do {
                let sealed = try ChaChaPoly.seal(
                    chunkPlaintext, using: payloadKey, nonce: chunkNonce(chunk, isFinal: chunk == chunks - 1)
                )
                output.append(contentsOf: sealed.ciphertext)
                output.append(contentsOf: sealed.tag)
            } catch {
                throw .cryptographicFailure("ChaCha20-Poly1305 could not seal payload chunk \(chunk)")
            }
        }
    }

    /// The plaintext of the payload that starts at `start` in `file`, all of it or
    /// nothing: a failure at any chunk zeroes what was decrypted before it.
    static func decrypt(_ file: [UInt8], from start: Int, fileKey: FileKey) throws(AgeError) -> [UInt8] {
        guard file.count - start >= nonceByteCount else {
            // age reads the nonce as part of opening the file, before the payload.
            throw .malformedHeader("the payload's 16-byte nonce is missing or short")
        }
        let payloadKey = fileKey.payloadKey(nonce: file[start..<(start + nonceByteCount)])
        let chunksStart = start + nonceByteCount
        let encryptedCount = file.count - chunksStart
        guard encryptedCount > 0 else {
            throw .malformedPayload("the payload has no chunks (the file is truncated)")
        }
        let chunks = (encryptedCount + encryptedChunkSize - 1) / encryptedChunkSize
        let finalChunkSize = encryptedCount - (chunks - 1) * encryptedChunkSize
        guard finalChunkSize >= tagByteCount else {
            throw .malformedPayload("the last chunk is shorter than its authentication tag (the file is truncated)")
        }
        guard finalChunkSize > tagByteCount || chunks == 1 else {
            throw .malformedPayload("the final chunk is empty but the payload is not")
        }

        var plaintext = [UInt8]()
        plaintext.reserveCapacity(encryptedCount - chunks * tagByteCount)
        for chunk in 0..<chunks {
            let chunkStart = chunksStart + chunk * encryptedChunkSize
            let chunkEnd = min(chunkStart + encryptedChunkSize, file.count)
            let isFinal = chunk == chunks - 1
            do {
                let sealed = try ChaChaPoly.SealedBox(
                    nonce: chunkNonce(chunk, isFinal: isFinal),
                    ciphertext: file[chunkStart..<(chunkEnd - tagByteCount)],
                    tag: file[(chunkEnd - tagByteCount)..<chunkEnd]
                )
                var opened = try ChaChaPoly.open(sealed, using: payloadKey)
                plaintext.append(contentsOf: opened)
                opened.zeroize()
            } catch {
                plaintext.zeroize()
                throw .malformedPayload(isFinal
                    ? "the final chunk (\(chunk)) does not authenticate: damaged, truncated, or not final"
                    : "chunk \(chunk) does not authenticate: damaged, or data follows the final chunk")
            }
        }
        return plaintext
    }

    /// The AEAD nonce of chunk `index`: 11-byte big-endian index, then the final flag.
    private static func chunkNonce(_ index: Int, isFinal: Bool) throws -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        var counter = UInt64(index)
        for position in stride(from: 10, through: 3, by: -1) {
            bytes[position] = UInt8(truncatingIfNeeded: counter)
            counter >>= 8
        }
        bytes[11] = isFinal ? 1 : 0
        return try ChaChaPoly.Nonce(data: bytes)
    }
}
