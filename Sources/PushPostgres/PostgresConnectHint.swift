/// What to do about the connection failures an operator meets first on a stock server
/// (Debian's pg_hba.conf: peer on the Unix socket, scram-sha-256 over TCP), appended to
/// libpq's message.
enum PostgresConnectHint {
    static func explained(_ message: String) -> String {
        if message.contains("no password supplied") {
            return message + """
                ; the server wants a password for this role: write it in an owner-only password file as the line \
                HOST:PORT:DATABASE:USER:PASSWORD (host and port as the URL names them) and add \
                passfile=/ABSOLUTE/PATH to the URL
                """
        }
        if message.contains("Peer authentication failed") {
            return message + """
                ; on the Unix socket the server admits only the system user of the role's name: connect over TCP \
                instead (a host such as localhost in the URL) with a password in a password file (passfile=)
                """
        }
        if message.contains("password authentication failed") {
            return message + "; the password given (password file or URL) is not the role's"
        }
        return message
    }
}
