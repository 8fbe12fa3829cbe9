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
        var nonce = [UInt8](repeating: 0, count: AES256GCM.nonceByteCount)
        guard RAND_bytes(&nonce, Int32(nonce.count)) == 1 else { throw .randomUnavailable }
        return try seal(plaintext, associatedData: associatedData, nonce: nonce)
    }

    /// With a given nonce: for the known-answer tests only; a nonce must never repeat under one key.
    func seal(_ plaintext: [UInt8], associatedData: [UInt8], nonce: [UInt8]) throws(CipherError) -> [UInt8] {
        guard nonce.count == AES256GCM.nonceByteCount else { throw .cipherFailed }
        var sealed = nonce + [UInt8](repeating: 0, count: plaintext.count + AES256GCM.tagByteCount)
        let textStart = AES256GCM.nonceByteCount
        let tagStart = textStart + plaintext.count
        let done = sealed.withUnsafeMutableBufferPointer { out -> Bool in
            guard let base = out.baseAddress else { return false }
            var length: Int32 = 0
            guard EVP_EncryptInit_ex(sealer, nil, nil, nil, base) == 1 else { return false }
            if !associatedData.isEmpty {
                guard EVP_EncryptUpdate(sealer, nil, &length, associatedData, Int32(associatedData.count)) == 1 else { return false }
            }
            if !plaintext.isEmpty {
                guard EVP_EncryptUpdate(sealer, base + textStart, &length, plaintext, Int32(plaintext.count)) == 1 else { return false }
            }
            // GCM writes nothing at the end; the tag is fetched separately.
            guard EVP_EncryptFinal_ex(sealer, base + tagStart, &length) == 1 else { return false }
            return EVP_CIPHER_CTX_ctrl(sealer, EVP_CTRL_GCM_GET_TAG, Int32(AES256GCM.tagByteCount), base + tagStart) == 1
        }
        guard done else { throw .cipherFailed }
        return sealed
    }

    /// The plaintext of a sealed message, if it and `associatedData` authenticate.
    public func open(_ sealed: [UInt8], associatedData: [UInt8]) throws(CipherError) -> [UInt8] {
        guard sealed.count >= AES256GCM.overhead else { throw .truncated }
        let textCount = sealed.count - AES256GCM.overhead
        let textStart = AES256GCM.nonceByteCount
        // One spare byte so the output pointer exists even for an empty plaintext.
        var plaintext = [UInt8](repeating: 0, count: textCount + 1)
        var tag = Array(sealed[(textStart + textCount)...])
        let outcome = sealed.withUnsafeBufferPointer { input -> CipherError? in
            plaintext.withUnsafeMutableBufferPointer { out -> CipherError? in
                guard let source = input.baseAddress, let target = out.baseAddress else { return .cipherFailed }
                var length: Int32 = 0
                guard EVP_DecryptInit_ex(opener, nil, nil, nil, source) == 1 else { return .cipherFailed }
                if !associatedData.isEmpty {
                    guard EVP_DecryptUpdate(opener, nil, &length, associatedData, Int32(associatedData.count)) == 1 else { return .cipherFailed }
                }
                if textCount > 0 {
                    guard EVP_DecryptUpdate(opener, target, &length, source + textStart, Int32(textCount)) == 1 else { return .cipherFailed }
                }
                guard EVP_CIPHER_CTX_ctrl(opener, EVP_CTRL_GCM_SET_TAG, Int32(AES256GCM.tagByteCount), &tag) == 1 else { return .cipherFailed }
                return EVP_DecryptFinal_ex(opener, target + textCount, &length) == 1 ? nil : .authenticationFailed
            }
        }
        if let outcome {
            // Nothing of an unauthenticated plaintext leaves this function.
            plaintext.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
            throw outcome
        }
        plaintext.removeLast()
        return plaintext
    }
}
