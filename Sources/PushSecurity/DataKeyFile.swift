#if canImport(Glibc)
import Glibc
#endif
import PushWire

/// One key that encrypts data at rest, named by a small number stored beside what it sealed.
public struct DataKey: Sendable, Equatable {
    public let id: UInt32
    public let bytes: [UInt8]

    public init?(id: UInt32, bytes: [UInt8]) {
        guard id > 0, bytes.count == AES256GCM.keyByteCount else { return nil }
        self.id = id
        self.bytes = bytes
    }
}

public enum DataKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    case missing(String)
    case unreadable(String, errno: Int32)
    case tooOpen(String)
    case malformed(String, line: Int)
    case noKeys(String)
    case cannotWrite(String, errno: Int32)
    case randomUnavailable
    case cipher(CipherError)
    /// A data key kept in the database is wrapped under a key of the `data-keys` file that
    /// this host's copy does not hold.
    case wrappingKeyMissing(id: UInt32, wrappedBy: UInt32)
    /// It does not open under this host's key of that id: the file differs from the one
    /// that wrapped it (or the row was altered).
    case unwrapFailed(id: UInt32, wrappedBy: UInt32)
    /// The file's key of this id is not the database's key of that id.
    case differs(id: UInt32)
    /// This host has no data-keys file, and the database holds the deployment's keys.
    case notCopied(String)

    /// The database's keys are wrapped under another data-keys file than this one.
    public var isAnotherDeploymentsFile: Bool {
        switch self {
        case .wrappingKeyMissing, .unwrapFailed, .differs: true
        default: false
        }
    }

    public var description: String {
        switch self {
        case .missing(let path): "\(path) does not exist"
        case .unreadable(let path, let code): "cannot read \(path): \(String(cString: strerror(code)))"
        case .tooOpen(let path): "\(path) is readable by others; run chmod 600 on it"
        case .malformed(let path, let line): "\(path):\(line): expected `KEYID HEX` (a number above 0 and 64 hex digits)"
        case .noKeys(let path): "\(path) holds no key"
        case .cannotWrite(let path, let code): "cannot write \(path): \(String(cString: strerror(code)))"
        case .randomUnavailable: "the system random generator failed"
        case .cipher(let error): error.description
        case .wrappingKeyMissing(let id, let by):
            "data key \(id) in the database is wrapped under key \(by) of the data-keys file, which this host's data-keys file does not hold: copy the deployment's data-keys file here"
        case .unwrapFailed(let id, let by):
            "data key \(id) in the database does not open under key \(by) of this host's data-keys file: this host's file differs from the deployment's"
        case .notCopied(let path):
            "\(path) does not exist, and the database holds the deployment's data keys: copy the deployment's directory (with its data-keys file) from a host of the deployment"
        case .differs(let id):
            "key \(id) of this host's data-keys file is not the database's data key \(id): this host's file differs from the deployment's"
        }
    }
}

/// The deployment's data keys file, `data-keys`: one `KEYID HEX` line per key, where the
/// highest id encrypts new data and the others only decrypt what they sealed earlier.
///
/// Losing a key loses what it sealed, so every change is made under an exclusive lock
/// (`data-keys.lock`) by reading the file again, writing a new one beside it, syncing it
/// and renaming it over the old one, then syncing the directory. Readers never lock: they
/// see the old file or the new one, never a mix.
public enum DataKeyFile {
    public static let fileName = "data-keys"

    public static func path(inDirectory directory: String) -> String { directory + "/" + fileName }

    /// The keys, oldest first. Refuses a file its group or others may read, like the
    /// deployment's other key files ([8-6]).
    public static func read(_ path: String) throws(DataKeyError) -> [DataKey] {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw errno == ENOENT ? .missing(path) : .unreadable(path, errno: errno) }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unreadable(path, errno: errno) }
        guard info.st_mode & 0o077 == 0 else { throw .tooOpen(path) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Glibc.read(fd, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path, errno: errno)
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        let keys = try parse(String(decoding: bytes, as: UTF8.self), path: path)
        guard !keys.isEmpty else { throw .noKeys(path) }
        return keys
    }

    static func parse(_ text: String, path: String) throws(DataKeyError) -> [DataKey] {
        var keys: [DataKey] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = content.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if words.isEmpty { continue }
            guard words.count == 2, let id = UInt32(words[0]), let bytes = [UInt8](hex: String(words[1])),
                  let key = DataKey(id: id, bytes: bytes), !keys.contains(where: { $0.id == id }) else {
                throw .malformed(path, line: index + 1)
            }
            keys.append(key)
        }
        return keys.sorted { $0.id < $1.id }
    }

    static func text(of keys: [DataKey]) -> String {
        var text = "# securepush data keys: KEYID HEX; the highest id encrypts new payloads. Keep with the database.\n"
        for key in keys.sorted(by: { $0.id < $1.id }) { text += "\(key.id) \(key.bytes.hexString)\n" }
        return text
    }

    /// The keys, creating the file with one fresh key if there is none yet.
    public static func readOrCreate(_ path: String) throws(DataKeyError) -> [DataKey] {
        do throws(DataKeyError) {
            return try read(path)
        } catch .missing {
            return try locked(path) { () throws(DataKeyError) -> [DataKey] in
                // Another process may have made it while this one waited for the lock.
                if let existing = try? read(path) { return existing }
                let first = try fresh(id: 1)
                try write([first], to: path)
                return [first]
            }
        }
    }

    /// Writes a new file holding one fresh key (`securepush init`).
    public static func create(_ path: String) throws(DataKeyError) {
        try write([try fresh(id: 1)], to: path)
    }

    /// Adds a key with the next id, which from now on encrypts new data; returns it.
    public static func add(_ path: String) throws(DataKeyError) -> DataKey {
        try locked(path) { () throws(DataKeyError) -> DataKey in
            var keys: [DataKey]
            do throws(DataKeyError) {
                keys = try read(path)
            } catch .missing {
                keys = []
            }
            let last = keys.last?.id ?? 0
            guard last < UInt32.max else { throw .malformed(path, line: 0) }
            let key = try fresh(id: last + 1)
            keys.append(key)
            try write(keys, to: path)
            return key
        }
    }

    /// Removes the keys for which `removable` says yes, never the newest; `removable` runs
    /// under the file's lock, so its answer still holds when the file is rewritten.
    /// Returns the ids removed.
    public static func remove(_ path: String, where removable: (DataKey) throws -> Bool) throws -> [UInt32] {
        try locked(path) { () throws -> [UInt32] in
            let keys = try read(path)
            let newest = keys.last?.id
            let gone = try keys.filter { key in
                guard key.id != newest else { return false }
                return try removable(key)
            }
            if gone.isEmpty { return [] }
            try write(keys.filter { key in !gone.contains { $0.id == key.id } }, to: path)
            return gone.map(\.id)
        }
    }

    public static func fresh(id: UInt32) throws(DataKeyError) -> DataKey {
        guard let bytes = try? SecureRandom.bytes(AES256GCM.keyByteCount), let key = DataKey(id: id, bytes: bytes) else {
            throw .randomUnavailable
        }
        return key
    }

    /// Runs `body` holding an exclusive lock on `PATH.lock`, across processes.
    static func locked<T, E: Error>(_ path: String, _ body: () throws(E) -> T) throws(E) -> T {
        let lockPath = path + ".lock"
        let fd = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        // Without a lock file (a read-only directory) nothing can be written anyway; the
        // body then fails on its own write with the real reason.
        if fd >= 0 {
            while flock(fd, LOCK_EX) != 0 && errno == EINTR {}
        }
        defer { if fd >= 0 { Glibc.close(fd) } }
        return try body()
    }

    /// Replaces the file atomically and durably, readable by its owner only.
    static func write(_ keys: [DataKey], to path: String) throws(DataKeyError) {
        let temporary = path + ".tmp"
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .cannotWrite(temporary, errno: errno) }
        fchmod(fd, 0o600)
        let bytes = Array(text(of: keys).utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { raw in
                Glibc.write(fd, UnsafeRawBufferPointer(rebasing: raw[offset...]).baseAddress, raw.count - offset)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                let code = errno
                Glibc.close(fd)
                unlink(temporary)
                throw .cannotWrite(temporary, errno: code)
            }
            offset += count
        }
        let synced = fsync(fd)
        let syncError = errno
        Glibc.close(fd)
        guard synced == 0 else {
            unlink(temporary)
            throw .cannotWrite(temporary, errno: syncError)
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw .cannotWrite(path, errno: code)
        }
        syncDirectory(of: path)
    }

    /// Makes a rename in the directory of `path` durable. A reader calls it too before it
    /// uses a key it has not seen: a row must never be committed under a key whose file
    /// could still vanish in a crash.
    public static func syncDirectory(of path: String) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let fd = Glibc.open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        Glibc.close(fd)
    }
}
