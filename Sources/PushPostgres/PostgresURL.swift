import CPostgres
import Glibc

/// Connection strings: a `postgresql://` URL or libpq's `key=value` form, read by libpq
/// itself (PQconninfoParse) so that what validates here is what connects.
public enum PostgresURL {
    /// Throws `.invalidURL` naming the problem when libpq cannot parse `conninfo`, or when
    /// it names a password file (`passfile`) by a relative path. The message never contains
    /// the password, even where libpq's own message would quote the whole URL.
    public static func validate(_ conninfo: String) throws(PostgresError) {
        try PostgresPassfile.checkPath(try parse(conninfo))
    }

    /// `conninfo` with its password (in the URL's user info, a `password` query parameter
    /// or a `password=` pair) replaced by `****`: for logs and error messages.
    public static func redacted(_ conninfo: String) -> String {
        PostgresURLRedaction.redact(conninfo)
    }

    /// Seconds a connect may take when the connection string names no `connect_timeout`.
    static let defaultConnectTimeoutSeconds = 10

    /// What every connection of this client is opened with: the parsed connection string,
    /// plus `synchronous_commit=on` (a COMMIT completes only once it is on disk, whatever the
    /// server's default), UTF-8 on the wire (text values are Swift strings), a bounded
    /// connect time, and `applicationName` for pg_stat_activity unless the string names one.
    /// A password file it names must be usable (`PostgresPassfile`).
    static func sessionParameters(_ conninfo: String, applicationName: String = "securepush") throws(PostgresError)
        -> [(key: String, value: String)] {
        var parameters = try parse(conninfo)
        try PostgresPassfile.checkPath(parameters)
        try PostgresPassfile.checkFile(parameters)
        func set(_ key: String, _ value: (String?) -> String?) {
            let index = parameters.firstIndex { $0.key == key }
            let new = value(index.map { parameters[$0].value })
            switch (index, new) {
            case (let index?, let new?): parameters[index].value = new
            case (nil, let new?): parameters.append((key, new))
            default: break
            }
        }
        // Appended last: a later -c wins, so the URL cannot turn durability off.
        set("options") { existing in
            let ours = "-c synchronous_commit=on"
            guard let existing, !existing.isEmpty else { return ours }
            return existing + " " + ours
        }
        set("client_encoding") { _ in "UTF8" }
        set("connect_timeout") { existing in
            if let existing, let seconds = Int(existing), seconds > 0 { return existing }
            return String(defaultConnectTimeoutSeconds)
        }
        set("fallback_application_name") { existing in existing ?? applicationName }
        return parameters
    }

    /// The options `conninfo` sets, in libpq's order; `.invalidURL` if it does not parse.
    static func parse(_ conninfo: String) throws(PostgresError) -> [(key: String, value: String)] {
        switch parseWithLibpq(conninfo) {
        case .parsed(let parameters):
            return parameters
        case .failed(let libpqMessage):
            let safe = redacted(conninfo)
            guard safe != conninfo else { throw PostgresError(kind: .invalidURL, message: libpqMessage) }
            // libpq may quote the whole URL in its message: say what it says about the same
            // string with the password masked, or, if only the password was at fault, that.
            switch parseWithLibpq(safe) {
            case .failed(let message): throw PostgresError(kind: .invalidURL, message: message)
            case .parsed: throw PostgresError(kind: .invalidURL, message: "the password is malformed (check its percent-encoding)")
            }
        }
    }

    private enum ParseOutcome {
        case parsed([(key: String, value: String)])
        case failed(String)
    }

    private static func parseWithLibpq(_ conninfo: String) -> ParseOutcome {
        if conninfo.utf8.contains(0) { return .failed("the connection string contains a NUL byte") }
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            defer { if let errorMessage { PQfreemem(errorMessage) } }
            let message = errorMessage.map { String(cString: $0) } ?? "out of memory"
            return .failed(trimmed(message))
        }
        defer { PQconninfoFree(options) }
        var parameters: [(key: String, value: String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                parameters.append((String(cString: keyword), String(cString: value)))
            }
            option += 1
        }
        return .parsed(parameters)
    }

    /// libpq's messages end in a newline.
    static func trimmed(_ message: String) -> String {
        var text = Substring(message)
        while let last = text.last, last == "\n" || last == " " { text = text.dropLast() }
        return String(text)
    }
}

/// Calls `body` with NULL-terminated C arrays of the keys and values, as
/// PQconnectStartParams and PQconnectdbParams take them.
func withConnectionArrays<R>(
    _ parameters: [(key: String, value: String)],
    _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<UnsafePointer<CChar>?>?) -> R
) -> R {
    let keys = parameters.map { strdup($0.key) }
    let values = parameters.map { strdup($0.value) }
    defer {
        keys.forEach { free($0) }
        values.forEach { free($0) }
    }
    let keyArray: [UnsafePointer<CChar>?] = keys.map { $0.map { UnsafePointer($0) } } + [nil]
    let valueArray: [UnsafePointer<CChar>?] = values.map { $0.map { UnsafePointer($0) } } + [nil]
    return keyArray.withUnsafeBufferPointer { keyPointer in
        valueArray.withUnsafeBufferPointer { valuePointer in
            body(keyPointer.baseAddress, valuePointer.baseAddress)
        }
    }
}
