#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushStoreLogic

/// Where the store keeps its files inside a deployment directory.
public enum StoreFiles {
    public static func databasePath(_ dataDirectory: String) -> String {
        dataDirectory + "/" + SQLitePayloadDatabase.fileName
    }

    /// The data keys that seal payloads live beside the database they serve.
    public static func dataKeysPath(forDatabase databasePath: String) -> String {
        DataKeyFile.path(inDirectory: directory(of: databasePath))
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// The database and the files SQLite keeps beside it.
    public static func databaseFiles(_ databasePath: String) -> [String] {
        [databasePath, databasePath + "-wal", databasePath + "-shm"]
    }

    /// Creates the database file readable by its owner only before SQLite opens it (SQLite
    /// gives its `-wal` and `-shm` files the database's mode), and takes group and other
    /// permissions off the files an earlier build left readable: they hold password hashes
    /// and sealed payloads.
    ///
    /// An existing database is never opened here: closing any descriptor of the file would
    /// drop every POSIX lock this process holds on it, including those of SQLite
    /// connections already open (the store's writer, when its reader opens), and another
    /// process would then take itself for the last user and delete the WAL.
    static func protectDatabaseFiles(_ databasePath: String) throws(SQLiteError) {
        let fd = open(databasePath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw SQLiteError(code: 0, message: "cannot create \(databasePath): \(String(cString: strerror(errno)))")
        }
        for path in databaseFiles(databasePath) {
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 else { continue }
            guard chmod(path, info.st_mode & 0o700) == 0 else {
                throw SQLiteError(code: 0, message: "cannot make \(path) owner-only: \(String(cString: strerror(errno)))")
            }
        }
    }
}

extension PayloadSealer {
    /// The ring of the deployment that holds `databasePath`, created on first use.
    convenience init(databasePath: String) throws(SQLiteError) {
        do {
            self.init(ring: try DataKeyRing(path: StoreFiles.dataKeysPath(forDatabase: databasePath)))
        } catch {
            throw SQLiteError(code: 0, message: "data keys: \(error)")
        }
    }
}
