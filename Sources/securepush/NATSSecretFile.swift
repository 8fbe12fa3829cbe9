import Glibc
import PushSecurity

/// Checks on the files a gateway reads for its NATS links, each failure naming the file.
/// A file holding a secret that group or others may read is refused, not warned about:
/// as with the deployment's key files and libpq's passfile, a warning in a service log is
/// easily missed, and a fix is one chmod.
enum NATSSecretFile {
    /// A plain file this process can read.
    static func checkReadable(_ path: String, what: String) throws {
        var status = stat()
        guard stat(path, &status) == 0 else {
            let reason = errno == ENOENT ? "does not exist" : "cannot be read: \(String(cString: strerror(errno)))"
            throw CommandFailure("\(what) \(path) \(reason)")
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw CommandFailure("\(what) \(path) is not a plain file") }
        guard access(path, R_OK) == 0 else {
            throw CommandFailure("\(what) \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
    }

    /// Readable, and closed to group and others.
    static func checkOwnerOnly(_ path: String, what: String) throws {
        try checkReadable(path, what: what)
        var status = stat()
        guard stat(path, &status) == 0 else { throw CommandFailure("\(what) \(path) cannot be read: \(String(cString: strerror(errno)))") }
        guard status.st_mode & (S_IRWXG | S_IRWXO) == 0 else {
            let mode = String(status.st_mode & 0o777, radix: 8)
            throw CommandFailure("\(what) \(path) has mode \(mode), open to group or others: chmod 600 \(path)")
        }
    }

    /// The first line of an owner-only file, without its line ending; never empty.
    static func firstLine(_ path: String, what: String) throws -> String {
        try checkOwnerOnly(path, what: what)
        let text: String
        do {
            text = try Deployment.readFile(path)
        } catch {
            throw CommandFailure("\(what): \(error)")
        }
        // By bytes: as Characters, "\r\n" is one and would not split at "\n".
        var line = Array(text.utf8.prefix { $0 != UInt8(ascii: "\n") })
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        guard !line.isEmpty else { throw CommandFailure("\(what) \(path): the first line is empty") }
        guard !line.contains(0) else { throw CommandFailure("\(what) \(path): the first line holds a NUL byte") }
        return String(decoding: line, as: UTF8.self)
    }
}
