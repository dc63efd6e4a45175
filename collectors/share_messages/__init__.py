"""Wire descriptions of the share-group admin requests (KIP-932) that kafka-python lacks, in
the JSON form its message classes are built from: ShareGroupDescribe (api key 77) and
DescribeShareGroupOffsets (api key 90; v1 adds each share-partition's lag, KIP-1226).
collectors/share_group_requests.py sends them."""
