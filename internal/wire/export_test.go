package wire

// ClientHandshake lets external tests speak the protocol by hand.
var ClientHandshake = clientHandshake

// AppendFrame lets external tests build frames.
var AppendFrame = appendFrame
