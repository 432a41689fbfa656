import Keyrings

/// One item `kc exec` hands to its command, as a variable or a file. The value is a
/// secret: whoever holds the item zeroes it when done.
public struct PassedItem {
    /// The service the item came from.
    public var service: KeyName
    /// The item's name: the file's name, or what the variable's name is made from.
    public var name: KeyName
    /// The item's value: the file's bytes or the variable's value.
    public var value: [UInt8]

    /// An item of `service` named `name` holding `value`.
    public init(service: KeyName, name: KeyName, value: [UInt8]) {
        self.service = service
        self.name = name
        self.value = value
    }
}
