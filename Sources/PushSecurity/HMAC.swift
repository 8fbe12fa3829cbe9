import COpenSSL

/// HMAC-SHA256 through OpenSSL's one-shot HMAC(), which is already linked for TLS.
public enum HMACSHA256 {
    public static let byteCount = 32

    public static func authenticate(_ data: UnsafeRawBufferPointer, key: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        key.withUnsafeBytes { keyBytes in
            _ = HMAC(EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count),
                     data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count, &out, &length)
        }
        return out
    }

    public static func authenticate(_ data: [UInt8], key: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { authenticate($0, key: key) }
    }

    /// Compares in time independent of where the inputs differ.
    public static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count, let pa = a.baseAddress, let pb = b.baseAddress else { return a.count == b.count && a.isEmpty }
        return CRYPTO_memcmp(pa, pb, a.count) == 0
    }
}

/// HKDF with HMAC-SHA256 (RFC 5869).
public enum HKDF {
    public static func extract(salt: [UInt8], inputKeyMaterial: [UInt8]) -> [UInt8] {
        let key = salt.isEmpty ? [UInt8](repeating: 0, count: HMACSHA256.byteCount) : salt
        return HMACSHA256.authenticate(inputKeyMaterial, key: key)
    }

    public static func expand(prk: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length <= 255 * HMACSHA256.byteCount)
        var output: [UInt8] = []
        var previous: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < length {
            previous = HMACSHA256.authenticate(previous + info + [counter], key: prk)
            output += previous
            counter += 1
        }
        return Array(output.prefix(length))
    }
}

/// SHA-256 through OpenSSL's one-shot SHA256(): the names of sealed payloads (SPEC.md 7.6)
/// are hashed on the store's path of every sealed STORE and SEND, where swift-crypto's
/// incremental SHA256 cost 16.9k instructions for a 39-byte input against this call's ~3k.
public enum SHA256Hash {
    public static let byteCount = 32

    public static func digest(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        data.withUnsafeBufferPointer { input in _ = SHA256(input.baseAddress, input.count, &out) }
        return out
    }
}
