import Glibc

/// Checks on the password file a connection string names (`passfile=`): libpq itself
/// reads a relative path from whatever directory the process runs in, and skips a file it
/// cannot read or that group or others may read (with a warning on stderr, which a
/// service's log does not show), then fails with "fe_sendauth: no password supplied".
/// These say what is wrong with the file instead.
enum PostgresPassfile {
    /// `.invalidURL` for a relative `passfile`: where it would be looked for depends on
    /// the directory the store happens to be started in.
    static func checkPath(_ parameters: [(key: String, value: String)]) throws(PostgresError) {
        guard let path = named(parameters), !path.hasPrefix("/") else { return }
        throw PostgresError(kind: .invalidURL, message: """
            passfile=\(path) is not an absolute path: libpq would look for it in whatever directory the process \
            runs in; name the file by its full path, as in passfile=/srv/push/pgpass
            """)
    }

    /// `.connection` when the named file is missing, unreadable, not a plain file, or
    /// open to group or others: checked at every connect, so fixing the file is enough.
    static func checkFile(_ parameters: [(key: String, value: String)]) throws(PostgresError) {
        guard let path = named(parameters) else { return }
        var status = stat()
        guard stat(path, &status) == 0 else {
            let reason = errno == ENOENT ? "does not exist" : "cannot be read: \(String(cString: strerror(errno)))"
            throw .connection("the password file \(path) (passfile= in the URL) \(reason)")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw .connection("the password file \(path) (passfile= in the URL) is not a plain file")
        }
        let loose = status.st_mode & (S_IRWXG | S_IRWXO)
        guard loose == 0 else {
            let mode = String(status.st_mode & 0o777, radix: 8)
            throw .connection("""
                the password file \(path) (passfile= in the URL) has mode \(mode), open to group or others, \
                so libpq ignores it: chmod 600 \(path)
                """)
        }
        guard access(path, R_OK) == 0 else {
            throw .connection("the password file \(path) (passfile= in the URL) cannot be read: \(String(cString: strerror(errno)))")
        }
    }

    private static func named(_ parameters: [(key: String, value: String)]) -> String? {
        guard let value = parameters.last(where: { $0.key == "passfile" })?.value, !value.isEmpty else { return nil }
        return value
    }
}
