import CLibevent
import PushWire

