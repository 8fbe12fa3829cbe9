import COpenSSL

public enum CipherError: Error, Equatable, Sendable, CustomStringConvertible {
    case badKeyLength
    /// libcrypto refused to set up or run the cipher.
    case cipherFailed
    case randomUnavailable
    /// Shorter than a nonce and a tag.
    case truncated
    /// The tag does not verify: wrong key, wrong associated data, or altered bytes.
    case authenticationFailed

    public var description: String {
        switch self {
        case .badKeyLength: "an AES-256 key is 32 bytes"
        case .cipherFailed: "libcrypto could not run AES-256-GCM"
        case .randomUnavailable: "the system random generator failed"
        case .truncated: "sealed data is shorter than its nonce and tag"
        case .authenticationFailed: "sealed data does not authenticate"
        }
    }
}

/// AES-256-GCM through libcrypto's EVP interface, sealing to `nonce || ciphertext || tag`
/// with a fresh random 96-bit nonce each time. The key schedule is computed once per
/// instance and each message only sets its nonce, so an instance serves one thread.
///
/// Random nonces bound how much one key may seal: after 2^32 messages the chance of a
/// repeated nonce reaches 2^-32 (NIST SP 800-38D), which is why data keys rotate.
public final class AES256GCM {
    public static let keyByteCount = 32
    public static let nonceByteCount = 12
    public static let tagByteCount = 16
    /// Bytes a sealed message has beyond its plaintext.
    public static let overhead = nonceByteCount + tagByteCount

    private let sealer: OpaquePointer
    private let opener: OpaquePointer
    /// Random bytes for the next nonces, drawn 256 nonces at a time: one RAND_bytes call
    /// costs more than sealing a small payload. Each nonce is taken once, in order.
    private var nonces = [UInt8](repeating: 0, count: AES256GCM.nonceByteCount * 256)
    private var nonceOffset = AES256GCM.nonceByteCount * 256

    public init(key: [UInt8]) throws(CipherError) {
        guard key.count == AES256GCM.keyByteCount else { throw .badKeyLength }
        guard let sealer = EVP_CIPHER_CTX_new() else { throw .cipherFailed }
        guard let opener = EVP_CIPHER_CTX_new() else {
            EVP_CIPHER_CTX_free(sealer)
            throw .cipherFailed
        }
        // The default nonce length of GCM in EVP is the 12 bytes used here.
        guard EVP_EncryptInit_ex(sealer, EVP_aes_256_gcm(), nil, key, nil) == 1,
              EVP_DecryptInit_ex(opener, EVP_aes_256_gcm(), nil, key, nil) == 1 else {
            EVP_CIPHER_CTX_free(sealer)
            EVP_CIPHER_CTX_free(opener)
            throw .cipherFailed
        }
        self.sealer = sealer
        self.opener = opener
    }

    deinit {
        EVP_CIPHER_CTX_free(sealer)
        EVP_CIPHER_CTX_free(opener)
    }

    /// Encrypts `plaintext` under a fresh random nonce, authenticating `associatedData` too.
    public func seal(_ plaintext: [UInt8], associatedData: [UInt8]) throws(CipherError) -> [UInt8] {
        try withBuffers(plaintext, associatedData) { (text, data) throws(CipherError) in try seal(text, associatedData: data, nonce: nil) }
    }

    /// The same without copies: what the store calls for every payload.
    public func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) throws(CipherError) -> [UInt8] {
        try seal(plaintext, associatedData: associatedData, nonce: nil)
    }

    /// With a given nonce: for the known-answer tests only; a nonce must never repeat under one key.
    func seal(_ plaintext: [UInt8], associatedData: [UInt8], nonce: [UInt8]) throws(CipherError) -> [UInt8] {
        guard nonce.count == AES256GCM.nonceByteCount else { throw .cipherFailed }
        return try withBuffers(plaintext, associatedData) { (text, data) throws(CipherError) in try seal(text, associatedData: data, nonce: nonce) }
    }

    private func seal(_ plaintext: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer, nonce: [UInt8]?) throws(CipherError) -> [UInt8] {
        let textStart = AES256GCM.nonceByteCount
        let tagStart = textStart + plaintext.count
        var failure: CipherError?
        let sealed = [UInt8](unsafeUninitializedCapacity: tagStart + AES256GCM.tagByteCount) { out, count in
            count = 0
            guard let base = out.baseAddress else { return failure = .cipherFailed }
            if let nonce {
                nonce.withUnsafeBufferPointer { _ = UnsafeMutableBufferPointer(start: base, count: textStart).initialize(from: $0) }
            } else if !takeNonce(into: base) {
                return failure = .randomUnavailable
            }
            var length: Int32 = 0
            guard EVP_EncryptInit_ex(sealer, nil, nil, nil, base) == 1,
                  associatedData.isEmpty
                    || EVP_EncryptUpdate(sealer, nil, &length, associatedData.bound, Int32(associatedData.count)) == 1,
                  plaintext.isEmpty
                    || EVP_EncryptUpdate(sealer, base + textStart, &length, plaintext.bound, Int32(plaintext.count)) == 1,
                  // GCM writes nothing at the end; the tag is fetched separately.
                  EVP_EncryptFinal_ex(sealer, base + tagStart, &length) == 1,
                  EVP_CIPHER_CTX_ctrl(sealer, EVP_CTRL_GCM_GET_TAG, Int32(AES256GCM.tagByteCount), base + tagStart) == 1 else {
                return failure = .cipherFailed
            }
            count = tagStart + AES256GCM.tagByteCount
        }
        if let failure { throw failure }
        return sealed
    }

    private func takeNonce(into target: UnsafeMutablePointer<UInt8>) -> Bool {
        if nonceOffset == nonces.count {
            guard RAND_bytes(&nonces, Int32(nonces.count)) == 1 else { return false }
            nonceOffset = 0
        }
        nonces.withUnsafeBufferPointer { pool in
            guard let source = pool.baseAddress else { return }
            target.initialize(from: source + nonceOffset, count: AES256GCM.nonceByteCount)
        }
        nonceOffset += AES256GCM.nonceByteCount
        return true
    }

    /// The plaintext of a sealed message, if it and `associatedData` authenticate.
    public func open(_ sealed: [UInt8], associatedData: [UInt8]) throws(CipherError) -> [UInt8] {
        try withBuffers(sealed, associatedData) { (text, data) throws(CipherError) in try open(text, associatedData: data) }
    }

    /// The same straight from a buffer (a SQLite column), without copying it first.
    public func open(_ sealed: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) throws(CipherError) -> [UInt8] {
        guard sealed.count >= AES256GCM.overhead, let source = sealed.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw .truncated
        }
        let textCount = sealed.count - AES256GCM.overhead
        let textStart = AES256GCM.nonceByteCount
        var failure: CipherError?
        // One spare byte so the output pointer exists even for an empty plaintext.
        let plaintext = [UInt8](unsafeUninitializedCapacity: textCount + 1) { out, count in
            count = 0
            guard let target = out.baseAddress else { return failure = .cipherFailed }
            var length: Int32 = 0
            // libcrypto copies the expected tag and never writes through this pointer.
            let tag = UnsafeMutableRawPointer(mutating: source + textStart + textCount)
            guard EVP_DecryptInit_ex(opener, nil, nil, nil, source) == 1,
                  associatedData.isEmpty
                    || EVP_DecryptUpdate(opener, nil, &length, associatedData.bound, Int32(associatedData.count)) == 1,
                  textCount == 0 || EVP_DecryptUpdate(opener, target, &length, source + textStart, Int32(textCount)) == 1,
                  EVP_CIPHER_CTX_ctrl(opener, EVP_CTRL_GCM_SET_TAG, Int32(AES256GCM.tagByteCount), tag) == 1 else {
                return failure = .cipherFailed
            }
            guard EVP_DecryptFinal_ex(opener, target + textCount, &length) == 1 else {
                // Nothing of an unauthenticated plaintext leaves this function.
                OPENSSL_cleanse(target, textCount)
                return failure = .authenticationFailed
            }
            count = textCount
        }
        if let failure { throw failure }
        return plaintext
    }

    private func withBuffers<T>(_ first: [UInt8], _ second: [UInt8],
                                _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws(CipherError) -> T) throws(CipherError) -> T {
        let result: Result<T, CipherError> = first.withUnsafeBytes { one in
            second.withUnsafeBytes { two in
                do throws(CipherError) { return .success(try body(one, two)) } catch { return .failure(error) }
            }
        }
        return try result.get()
    }
}

private extension UnsafeRawBufferPointer {
    /// The bytes as libcrypto's `const unsigned char *`; only called on non-empty buffers.
    var bound: UnsafePointer<UInt8>? { baseAddress?.assumingMemoryBound(to: UInt8.self) }
}
