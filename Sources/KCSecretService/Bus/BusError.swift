/// A D-Bus error reply: its name (`org.freedesktop.Secret.Error.NoSuchObject`) and a
/// message a person can act on.
public struct BusError: Error, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(_ name: String, _ message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    static func invalidArguments(_ message: String) -> BusError { BusError("org.freedesktop.DBus.Error.InvalidArgs", message) }
    static func noSuchObject(_ path: String) -> BusError { BusError("org.freedesktop.Secret.Error.NoSuchObject", "no such object: \(path)") }
    static func unknownObject(_ path: String) -> BusError { BusError("org.freedesktop.DBus.Error.UnknownObject", "kc-secretd has no object \(path)") }
    static func unknownMethod(_ interface: String, _ member: String, on path: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.UnknownMethod", "\(path) has no method \(member) in \(interface)")
    }
    static func unknownProperty(_ name: String) -> BusError { BusError("org.freedesktop.DBus.Error.UnknownProperty", "no property \(name)") }
    static func readOnlyProperty(_ name: String) -> BusError { BusError("org.freedesktop.DBus.Error.PropertyReadOnly", "\(name) is read-only") }
    static func noSession(_ path: String) -> BusError {
        BusError("org.freedesktop.Secret.Error.NoSession",
                 "no open session \(path) on this connection (a connection's least recently used sessions close when it holds many); call OpenSession")
    }
    static func isLocked(_ what: String) -> BusError { BusError("org.freedesktop.Secret.Error.IsLocked", what) }
    static func notSupported(_ message: String) -> BusError { BusError("org.freedesktop.DBus.Error.NotSupported", message) }
    static func accessDenied(_ message: String) -> BusError { BusError("org.freedesktop.DBus.Error.AccessDenied", message) }
    static func limitsExceeded(_ message: String) -> BusError { BusError("org.freedesktop.DBus.Error.LimitsExceeded", message) }
    static func failed(_ message: String) -> BusError { BusError("org.freedesktop.DBus.Error.Failed", message) }
}
