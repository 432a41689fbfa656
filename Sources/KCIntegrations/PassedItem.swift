import Keyrings

/// One item `kc exec` hands to its command, as a variable or a file. The value is a
/// secret: whoever holds the item zeroes it when done.
public struct PassedItem {
    public var service: KeyName
    public var name: KeyName
    public var value: [UInt8]

    public init(service: KeyName, name: KeyName, value: [UInt8]) {
        self.service = service
        self.name = name
        self.value = value
    }
}
