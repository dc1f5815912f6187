DROP TABLE IF EXISTS singleflight_entries;
DROP SEQUENCE IF EXISTS singleflight_epoch_seq;
