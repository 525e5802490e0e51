package redistest

import "strings"

// SlotOf returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first "{" and the next "}",
// when not empty), modulo 16384, as CLUSTER KEYSLOT computes it.
func SlotOf(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key)) % totalSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), bit by bit:
// the harness hashes few keys, so a lookup table would not pay for itself.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
