#if canImport(Glibc)
import Glibc
#endif

/// The data keys of one deployment as one thread uses them: a cipher per key, the newest
/// for new data, and a cheap way to notice that another process changed the file.
/// Not thread-safe: the store's writer thread and its loop each keep their own ring.
///
/// A ring without a file (PostgreSQL, whose keys live in the database) holds what its
/// owner last `install`ed.
public final class DataKeyRing {
    public let path: String?
    private var ciphers: [UInt32: AES256GCM] = [:]
    public private(set) var currentID: UInt32 = 0
    private var stamp = FileStamp()

    /// Reads the keys, creating the file with a first key if it does not exist yet.
    public init(path: String) throws(DataKeyError) {
        self.path = path
        _ = try DataKeyFile.readOrCreate(path)
        try reload()
    }

    /// A ring of keys kept elsewhere; `current` seals new data.
    public init(keys: [DataKey], current: UInt32) throws(DataKeyError) {
        path = nil
        try install(keys, current: current)
    }

    /// Replaces the keys of a ring without a file, keeping the ciphers already made.
    public func install(_ keys: [DataKey], current: UInt32) throws(DataKeyError) {
        guard keys.contains(where: { $0.id == current }) else { throw .noKeys("the database's data_keys") }
        ciphers = try DataKeyRing.ciphers(for: keys, reusing: ciphers)
        currentID = current
    }

    /// The cipher of the newest key, which seals everything new.
    public var current: AES256GCM {
        // reload() never leaves the ring without its current key.
        ciphers[currentID]!
    }

    /// The cipher of key `id`, reading the file again once if it is not known yet (a key
    /// another process added since).
    public func cipher(for id: UInt32) -> AES256GCM? {
        if let cipher = ciphers[id] { return cipher }
        _ = try? refreshIfChanged()
        return ciphers[id]
    }

    public var keyIDs: [UInt32] { ciphers.keys.sorted() }

    /// Reads the file again if it changed since it was last read (one stat); true if it
    /// did. A file that became unreadable keeps the keys already known and throws.
    @discardableResult
    public func refreshIfChanged() throws(DataKeyError) -> Bool {
        guard let path, FileStamp(path: path) != stamp else { return false }
        try reload()
        return true
    }

    private func reload() throws(DataKeyError) {
        guard let path else { return }
        let before = FileStamp(path: path)
        let keys = try DataKeyFile.read(path)
        let fresh = try DataKeyRing.ciphers(for: keys, reusing: ciphers)
        guard let newest = keys.last?.id else { throw .noKeys(path) }
        // What is about to be sealed under a new key must not outlive the key's file in a crash.
        if newest != currentID { DataKeyFile.syncDirectory(of: path) }
        ciphers = fresh
        currentID = newest
        stamp = before
    }
}

extension DataKeyRing {
    static func ciphers(for keys: [DataKey], reusing known: [UInt32: AES256GCM]) throws(DataKeyError) -> [UInt32: AES256GCM] {
        var fresh: [UInt32: AES256GCM] = [:]
        for key in keys {
            if let cipher = known[key.id] {
                fresh[key.id] = cipher
                continue
            }
            do throws(CipherError) {
                fresh[key.id] = try AES256GCM(key: key.bytes)
            } catch {
                throw .cipher(error)
            }
        }
        return fresh
    }
}

/// Enough of a file's stat to see that it was replaced or rewritten.
struct FileStamp: Equatable {
    var device: UInt64 = 0
    var inode: UInt64 = 0
    var size: Int64 = -1
    var modifiedNs: Int64 = 0
    var changedNs: Int64 = 0

    init() {}

    init(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedNs = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        changedNs = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
    }
}
