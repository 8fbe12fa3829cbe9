/// Wraps data keys for keeping in a shared database (PostgreSQL): each key sealed with
/// AES-256-GCM under a key-encryption key derived (HKDF-SHA256) from one key of the
/// deployment's `data-keys` file, which every store host holds already. The database alone
/// then opens nothing, and a key added on one host reaches the others with no file to copy.
public struct DataKeyWrapping {
    /// The file's keys by id; the newest wraps what is added.
    private let fileKeys: [UInt32: DataKey]
    public let wrappingKeyID: UInt32

    public init(fileKeys: [DataKey]) throws(DataKeyError) {
        guard let newest = fileKeys.map(\.id).max() else { throw .noKeys("data-keys") }
        self.fileKeys = Dictionary(fileKeys.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        wrappingKeyID = newest
    }

    /// `key` sealed under the newest file key, and that key's id.
    public func wrap(_ key: DataKey) throws(DataKeyError) -> (wrappedBy: UInt32, sealed: [UInt8]) {
        let cipher = try kek(wrappingKeyID, for: key.id)
        do throws(CipherError) {
            return (wrappingKeyID, try cipher.seal(key.bytes, associatedData: DataKeyWrapping.associatedData(key.id, wrappingKeyID)))
        } catch {
            throw .cipher(error)
        }
    }

    /// The key `id` that `wrappedBy` sealed as `sealed`; fails if this host's file lacks
    /// that key or holds another key under its id.
    public func unwrap(id: UInt32, wrappedBy: UInt32, sealed: [UInt8]) throws(DataKeyError) -> DataKey {
        let cipher = try kek(wrappedBy, for: id)
        guard let bytes = try? cipher.open(sealed, associatedData: DataKeyWrapping.associatedData(id, wrappedBy)),
              let key = DataKey(id: id, bytes: bytes) else {
            throw .unwrapFailed(id: id, wrappedBy: wrappedBy)
        }
        return key
    }

    private func kek(_ fileKeyID: UInt32, for id: UInt32) throws(DataKeyError) -> AES256GCM {
        guard let fileKey = fileKeys[fileKeyID] else { throw .wrappingKeyMissing(id: id, wrappedBy: fileKeyID) }
        let prk = HKDF.extract(salt: Array("securepush data-key wrapping".utf8), inputKeyMaterial: fileKey.bytes)
        do throws(CipherError) {
            return try AES256GCM(key: HKDF.expand(prk: prk, info: Array("key-encryption key v1".utf8), length: AES256GCM.keyByteCount))
        } catch {
            throw .cipher(error)
        }
    }

    /// Binds a wrapped key to its id and its wrapping key: a row copied under another id
    /// does not open.
    private static func associatedData(_ id: UInt32, _ wrappedBy: UInt32) -> [UInt8] {
        Array("securepush data key".utf8) + withUnsafeBytes(of: id.bigEndian, Array.init) + withUnsafeBytes(of: wrappedBy.bigEndian, Array.init)
    }
}
