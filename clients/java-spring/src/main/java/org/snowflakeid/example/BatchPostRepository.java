package org.snowflakeid.example;

import org.springframework.data.jpa.repository.JpaRepository;

public interface BatchPostRepository extends JpaRepository<BatchPost, Long> {
}
