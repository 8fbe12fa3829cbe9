/// Where the store keeps its files inside a deployment directory.
public enum StoreFiles {
    public static func databasePath(_ dataDirectory: String) -> String {
        dataDirectory + "/" + SQLitePayloadDatabase.fileName
    }
}
