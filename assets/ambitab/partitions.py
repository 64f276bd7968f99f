"""One static partition per AmbiTab source corpus (the conversions of ``pipelines/ambitab``)."""

from dagster import StaticPartitionsDefinition

from pipelines.ambitab.record import CORPORA

corpus_partitions = StaticPartitionsDefinition(list(CORPORA))
